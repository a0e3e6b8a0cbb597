// Parity with the current npm `e2b` client (issue 13): what an unmodified
// client does and must see answered as E2B answers it — isRunning() of a
// paused sandbox, listing order / filters / pagination, metrics ranges,
// the batch metrics route, the sandbox's logs, and the filesystem-only pause.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { waitFor, api, tracked } from './helpers.mjs'

const { created, make, kill } = tracked()

test('isRunning() is false after pause() and true after connect()', { timeout: 120_000 }, async () => {
  const sbx = await make()
  assert.equal(await sbx.isRunning(), true)
  assert.equal(await sbx.pause(), true)
  assert.equal(await sbx.isRunning(), false)
  // E2B's proxy body for a paused sandbox, as a 502.
  const res = await fetch(`${process.env.E2B_SANDBOX_URL}/health`, {
    headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' },
  })
  assert.equal(res.status, 502)
  assert.deepEqual(await res.json(), {
    sandboxId: sbx.sandboxId, message: 'The sandbox is paused', code: 502, canAutoResume: false,
  })
  await sbx.connect()
  assert.equal(await sbx.isRunning(), true)
  await kill(sbx)
})

// Every page of a listing, following the paginator.
async function listAll(opts) {
  const out = []
  const pager = Sandbox.list(opts)
  while (pager.hasNext) out.push(...(await pager.nextItems()))
  return out
}

test('Sandbox.list: newest first, order, filters, pagination across pages', { timeout: 120_000 }, async () => {
  const tag = `list-${Date.now()}`
  const boxes = []
  for (let i = 0; i < 3; i++) boxes.push(await make({ metadata: { suite: tag, i: String(i) } }))
  const ids = boxes.map((b) => b.sandboxId)
  const newest = [...ids].reverse()
  const query = { metadata: { suite: tag } }

  const byDefault = await listAll({ query, limit: 1 })
  assert.deepEqual(byDefault.map((s) => s.sandboxId), newest, 'newest first, one per page')
  const asc = await listAll({ query, limit: 2, order: 'asc' })
  assert.deepEqual(asc.map((s) => s.sandboxId), ids, 'order asc')

  const second = byDefault.find((s) => s.sandboxId === ids[1])
  const after = await listAll({ query: { ...query, startedAfter: second.startedAt }, order: 'asc' })
  assert.deepEqual(after.map((s) => s.sandboxId), ids.slice(1), 'startedAfter is inclusive')
  assert.equal((await listAll({ query: { ...query, template: 'base' } })).length, 3, 'template by name')
  assert.deepEqual(await listAll({ query: { ...query, template: 'no-such-template' } }), [], 'unknown template')
  assert.deepEqual((await listAll({ query: { metadata: { suite: tag, i: '2' } } })).map((s) => s.sandboxId), [ids[2]])

  await boxes[0].pause()
  const paused = await listAll({ query: { ...query, state: ['paused'] } })
  assert.deepEqual(paused.map((s) => s.sandboxId), [ids[0]], 'state filter')

  // Stable while sandboxes come and go: kill the last page's sandbox and
  // create a new one after the first page; nothing repeats or is skipped.
  const pager = Sandbox.list({ query, limit: 1 })
  const seen = (await pager.nextItems()).map((s) => s.sandboxId)
  await kill(boxes[1])
  await make({ metadata: { suite: tag, i: '3' } })
  while (pager.hasNext) seen.push(...(await pager.nextItems()).map((s) => s.sandboxId))
  assert.deepEqual(seen, [ids[2], ids[0]], 'pages are positions, not offsets')

  const res = await fetch(`${process.env.E2B_API_URL}/v2/sandboxes?limit=1`, { headers: { 'X-API-Key': process.env.E2B_API_KEY } })
  assert.ok(Number(res.headers.get('X-Total-Running')) >= 2, `X-Total-Running ${res.headers.get('X-Total-Running')}`)
  for (const id of [...created]) await Sandbox.kill(id)
  created.clear()
})

test('Sandbox.listSnapshots: newest first, name and sandbox filters, pages stable while snapshots come and go', { timeout: 120_000 }, async () => {
  const sbx = await make()
  const name = `parity-snap-${Date.now()}`
  const snaps = []
  for (let i = 0; i < 3; i++) snaps.push((await sbx.createSnapshot(i === 0 ? { name } : {})).snapshotId)
  const all = []
  const pager = Sandbox.listSnapshots({ sandboxId: sbx.sandboxId, limit: 1 })
  while (pager.hasNext) all.push(...(await pager.nextItems()))
  assert.deepEqual(all.map((s) => s.snapshotId), [...snaps].reverse())
  for (const n of [name, `${name}:default`, snaps[0]]) {
    const got = await Sandbox.listSnapshots({ name: n }).nextItems()
    assert.deepEqual(got.map((s) => s.snapshotId), [snaps[0]], `name ${n}`)
  }

  // A page token is a position: delete the next page's snapshot and take a
  // newer one after the first page; nothing repeats, nothing is skipped.
  const moving = Sandbox.listSnapshots({ sandboxId: sbx.sandboxId, limit: 1 })
  const seen = (await moving.nextItems()).map((s) => s.snapshotId)
  assert.equal(await Sandbox.deleteSnapshot(snaps[1]), true)
  snaps.push((await sbx.createSnapshot()).snapshotId)
  while (moving.hasNext) seen.push(...(await moving.nextItems()).map((s) => s.snapshotId))
  assert.deepEqual(seen, [snaps[2], snaps[0]], 'pages are positions, not offsets')
  const now = []
  const again = Sandbox.listSnapshots({ sandboxId: sbx.sandboxId, limit: 2 })
  while (again.hasNext) now.push(...(await again.nextItems()).map((s) => s.snapshotId))
  assert.deepEqual(now, [snaps[3], snaps[2], snaps[0]], 'a new listing sees the change')

  for (const limit of [0, 101]) {
    await assert.rejects(Sandbox.listSnapshots({ sandboxId: sbx.sandboxId, limit }).nextItems(), (e) => e.statusCode === 400, `snapshots limit ${limit}`)
  }
  for (const id of [snaps[0], snaps[2], snaps[3]]) await Sandbox.deleteSnapshot(id)
  await kill(sbx)
})

test('Sandbox.list: template by id or name; limit bounds 1..100 (0 and 101 are a 400)', { timeout: 120_000 }, async () => {
  const src = await make()
  const name = `parity-tpl-${Date.now()}`
  const snap = await src.createSnapshot({ name })
  const tag = `tpl-${Date.now()}`
  const child = await make({ metadata: { suite: tag } }, name)
  const templateId = (await Sandbox.getInfo(child.sandboxId)).templateId
  assert.notEqual(templateId, name, 'a snapshot\'s id is not its name')
  for (const template of [templateId, name]) {
    const got = await listAll({ query: { metadata: { suite: tag }, template } })
    assert.deepEqual(got.map((s) => s.sandboxId), [child.sandboxId], `template ${template}`)
  }
  for (const limit of [0, 101]) {
    await assert.rejects(Sandbox.list({ limit }).nextItems(), (e) => e.statusCode === 400 && /limit/.test(e.message), `limit ${limit}`)
  }
  for (const limit of [1, 100]) assert.ok(Array.isArray(await Sandbox.list({ limit }).nextItems()), `limit ${limit}`)
  await kill(child)
  await kill(src)
  await Sandbox.deleteSnapshot(snap.snapshotId)
})

test('getMetrics: a range before the sandbox existed is empty; now is not', { timeout: 60_000 }, async () => {
  const sbx = await make()
  const before = await sbx.getMetrics({ start: new Date(Date.now() - 3_600_000), end: new Date(Date.now() - 600_000) })
  assert.deepEqual(before, [])
  const now = await waitFor('a metric reading', async () => {
    const ms = await sbx.getMetrics({ start: new Date(Date.now() - 60_000), end: new Date(Date.now() + 60_000) })
    return ms.length > 0 && ms
  }, 10_000, 500)
  assert.ok(now[0].memTotal > 0 && now[0].cpuCount > 0, JSON.stringify(now[0]))
  await kill(sbx)
})

test('GET /sandboxes/metrics?sandbox_ids=: the latest reading of each running sandbox named', { timeout: 120_000 }, async () => {
  const a = await make()
  const b = await make()
  await a.commands.run('head -c 4194304 /dev/urandom > /home/user/fill.bin')
  // The SDK's API client sends the array comma-joined, as E2B's spec asks.
  const batch = (ids) => api('GET', '/sandboxes/metrics', { query: { sandbox_ids: ids } })
  const got = await waitFor('readings of both', async () => {
    const r = await batch([a.sandboxId, b.sandboxId, 'nosuchsandbox'])
    assert.equal(r.status, 200, JSON.stringify(r.error))
    return Object.keys(r.data.sandboxes).length === 2 && r.data.sandboxes
  }, 10_000, 500)
  assert.deepEqual(Object.keys(got).sort(), [a.sandboxId, b.sandboxId].sort(), 'an unknown id is left out')
  for (const [id, m] of Object.entries(got)) {
    assert.ok(m.cpuCount > 0 && m.memTotal > 0 && m.diskTotal > 0, `${id}: ${JSON.stringify(m)}`)
    for (const k of ['cpuUsedPct', 'memUsed', 'memCache', 'diskUsed']) assert.equal(typeof m[k], 'number', `${id}.${k}`)
    assert.ok(Math.abs(m.timestampUnix - Date.now() / 1000) < 60, `${id}: timestampUnix ${m.timestampUnix}`)
    assert.equal(Math.floor(Date.parse(m.timestamp) / 1000), m.timestampUnix, `${id}: timestamp ${m.timestamp}`)
    // The guest's view: its page cache, and what it wrote to / (df's used:
    // the template's files are not the sandbox's disk use).
    assert.ok(m.memCache > 0 && m.diskUsed < m.diskTotal, `${id}: ${JSON.stringify(m)}`)
  }
  assert.ok(got[a.sandboxId].diskUsed >= got[b.sandboxId].diskUsed + (4 << 20), `the 4 MiB written: ${got[a.sandboxId].diskUsed} vs ${got[b.sandboxId].diskUsed}`)
  await b.pause()
  const afterPause = await batch([a.sandboxId, b.sandboxId])
  assert.deepEqual(Object.keys(afterPause.data.sandboxes), [a.sandboxId], 'a paused sandbox has no current reading')

  const tooMany = Array.from({ length: 101 }, (_, i) => `s${i}`)
  for (const [what, ids] of [['101 ids', tooMany], ['none', undefined]]) {
    const r = await batch(ids)
    assert.equal(r.status, 400, `${what}: ${r.status} ${JSON.stringify(r.error)}`)
  }
  await kill(a)
  await kill(b)
})

// The logs routes, which the SDK has no method for yet, through its own
// API client (helpers.mjs api).
async function logs(path, query) {
  const res = await api('GET', path, { query })
  assert.equal(res.status, 200, JSON.stringify(res.error))
  return res.data
}

test('logs show a command exit and a pause/resume, in both routes', { timeout: 120_000 }, async () => {
  const sbx = await make()
  await sbx.commands.run('echo hi && exit 3').catch(() => {})
  await sbx.pause()
  await sbx.connect()
  const id = sbx.sandboxId
  const v2 = await waitFor('the resume in the logs', async () => {
    const d = await logs(`/v2/sandboxes/${id}/logs`, {})
    return d.logs.some((l) => l.message === 'sandbox resumed') && d
  })
  const msgs = v2.logs.map((l) => l.message)
  const exit = v2.logs.find((l) => l.fields.exitCode === '3')
  assert.ok(exit, `an exit with code 3 in ${JSON.stringify(msgs)}`)
  assert.equal(exit.level, 'warn')
  assert.match(exit.message, /exit 3/)
  for (const m of ['sandbox created', 'sandbox paused', 'sandbox resumed']) assert.ok(msgs.includes(m), `${m} in ${msgs}`)
  assert.ok(msgs.indexOf('sandbox paused') < msgs.indexOf('sandbox resumed'))
  assert.ok(msgs.findIndex((m) => m.startsWith('process exited')) < msgs.indexOf('sandbox paused'), 'the exit is logged before the pause')

  const warn = await logs(`/v2/sandboxes/${id}/logs`, { level: 'warn' })
  assert.ok(warn.logs.length >= 1 && warn.logs.every((l) => l.level === 'warn' || l.level === 'error'))
  const back = await logs(`/v2/sandboxes/${id}/logs`, { direction: 'backward', limit: 1 })
  assert.equal(back.logs.length, 1)
  assert.equal(back.logs[0].message, v2.logs.at(-1).message)
  const found = await logs(`/v2/sandboxes/${id}/logs`, { search: 'sandbox paused' })
  assert.deepEqual(found.logs.map((l) => l.message), ['sandbox paused'])

  const v1 = await logs(`/sandboxes/${id}/logs`, { start: 0, limit: 1000 })
  assert.equal(v1.logs.length, v2.logs.length)
  const line = JSON.parse(v1.logs[0].line)
  assert.equal(line.level, 'info')
  assert.equal(line.logger, 'forkbox.lifecycle')
  assert.equal(line.message, 'sandbox created')
  await kill(sbx)
})

const bootId = async (sbx) => (await sbx.files.read('/proc/sys/kernel/random/boot_id')).trim()

test('pause({keepMemory: false}) → connect: a new boot, files kept, processes gone', { timeout: 180_000 }, async () => {
  const sbx = await make()
  const boot = await bootId(sbx)
  await sbx.files.write('/home/user/kept.txt', 'kept across a filesystem-only pause')
  await sbx.files.write('/tmp/kept.txt', '/tmp too, as on E2B')
  await sbx.commands.run('sleep 1000', { background: true })
  // A background command is answered once its login shell started, before
  // that shell ran its profile and exec'd sleep; a pooled pgrep can beat it.
  await waitFor('the background sleep', async () => (await sbx.commands.run('pgrep -x sleep || true')).stdout.trim() !== '')
  assert.equal(await sbx.pause({ keepMemory: false }), true)
  assert.equal(await sbx.isRunning(), false)
  assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'paused')

  // A snapshot and a clone of the filesystem-only pause boot with its files.
  const snap = await sbx.createSnapshot()
  const fromSnap = await make({}, snap.snapshotId)
  assert.equal(await fromSnap.files.read('/home/user/kept.txt'), 'kept across a filesystem-only pause')
  assert.equal(await fromSnap.files.read('/tmp/kept.txt'), '/tmp too, as on E2B')
  await kill(fromSnap)

  await sbx.connect()
  assert.equal(await sbx.isRunning(), true)
  assert.notEqual(await bootId(sbx), boot, 'a new boot id')
  assert.equal(await sbx.files.read('/home/user/kept.txt'), 'kept across a filesystem-only pause')
  assert.equal(await sbx.files.read('/tmp/kept.txt'), '/tmp too, as on E2B')
  assert.equal((await sbx.commands.run('pgrep -x sleep || true')).stdout.trim(), '', 'processes are gone')

  await Sandbox.deleteSnapshot(snap.snapshotId)
  await kill(sbx)
})

test('onTimeout {action: pause, keepMemory: false}: lifecycle reported, timeout pauses files only', { timeout: 120_000 }, async () => {
  const sbx = await make({ timeoutMs: 4_000, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } })
  const info = await Sandbox.getInfo(sbx.sandboxId)
  assert.deepEqual(info.lifecycle, { onTimeout: 'pause', autoResume: false })
  const boot = await bootId(sbx)
  await sbx.files.write('/home/user/t.txt', 'x')
  await waitFor('the timeout pause', async () => (await Sandbox.getInfo(sbx.sandboxId)).state === 'paused', 20_000, 200)
  assert.equal(await sbx.isRunning(), false)
  await sbx.connect({ timeoutMs: 60_000 })
  assert.notEqual(await bootId(sbx), boot)
  assert.equal(await sbx.files.read('/home/user/t.txt'), 'x')
  await kill(sbx)

  // keepMemory: false with autoResume: true is refused (the SDK checks it
  // too; the server must, for any client).
  const res = await fetch(`${process.env.E2B_API_URL}/v2/sandboxes`, {
    method: 'POST',
    headers: { 'X-API-Key': process.env.E2B_API_KEY, 'Content-Type': 'application/json' },
    body: JSON.stringify({ templateID: 'base', autoPause: true, autoPauseMemory: false, autoResume: { enabled: true } }),
  })
  assert.equal(res.status, 400, await res.text())
})

test('connect({onResume: reboot}) of a memory-paused sandbox: a new boot, files kept, processes gone', { timeout: 180_000 }, async () => {
  const sbx = await make()
  const boot = await bootId(sbx)
  await sbx.files.write('/home/user/reboot.txt', 'kept across a reboot connect')
  await sbx.commands.run('mkdir -p /tmp/d && echo in-tmp > /tmp/d/reboot.txt')
  await sbx.commands.run('sleep 1000', { background: true })
  assert.equal(await sbx.pause(), true)
  assert.equal(await sbx.isRunning(), false)
  await sbx.connect({ onResume: 'reboot' })
  assert.equal(await sbx.isRunning(), true)
  assert.notEqual(await bootId(sbx), boot, 'a new boot id')
  assert.equal(await sbx.files.read('/home/user/reboot.txt'), 'kept across a reboot connect')
  assert.equal(await sbx.files.read('/tmp/d/reboot.txt'), 'in-tmp\n', '/tmp is kept, as on E2B')
  // /tmp is still the disk: writes past its size fail there.
  const dd = await sbx.commands.run('dd if=/dev/zero of=/tmp/fill bs=1M count=1100 2>&1; rm -f /tmp/fill', { timeoutMs: 60_000 })
  assert.match(dd.stdout, /No space left on device/, JSON.stringify(dd))
  assert.equal((await sbx.commands.run('pgrep -x sleep || true')).stdout.trim(), '', 'processes are gone')
  // The rebooted sandbox (booted from files) pauses and resumes with
  // memory again, and reboots again: both restore an image of a sandbox
  // booted from files, which runsc checks more loosely.
  await sbx.commands.run('sleep 1000', { background: true })
  assert.equal(await sbx.pause(), true)
  await sbx.connect()
  // The pause may have caught its login shell before it exec'd sleep; the
  // resumed shell goes on and does.
  await waitFor('a memory resume keeps processes', async () => (await sbx.commands.run('pgrep -x sleep || true')).stdout.trim() !== '')
  const second = await bootId(sbx)
  assert.equal(await sbx.pause(), true)
  await sbx.connect({ onResume: 'reboot' })
  assert.notEqual(await bootId(sbx), second, 'a new boot id again')
  assert.equal(await sbx.files.read('/home/user/reboot.txt'), 'kept across a reboot connect')
  assert.equal(await sbx.files.read('/tmp/d/reboot.txt'), 'in-tmp\n')
  await kill(sbx)
})
