// Persistence with unmodified npm clients: pause / connect (resume),
// Sandbox.list of paused sandboxes, fork, snapshots (create, list, delete,
// create from one) with `e2b`, and Sandbox.clone with `novita-sandbox`.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

const created = new Set()
after(async () => {
  for (const id of created) await Sandbox.kill(id).catch(() => {})
})

async function make(opts = {}) {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000, ...opts })
  created.add(sbx.sandboxId)
  return sbx
}

// A Python process holding a variable in memory; it mirrors it to a file.
async function startCounter(sbx) {
  await sbx.files.write('/tmp/count.py', [
    'import time, uuid',
    'token = uuid.uuid4().hex',
    'i = 0',
    'while True:',
    '    i += 1',
    '    open("/tmp/state.tmp", "w").write("%s:%d" % (token, i))',
    '    __import__("os").replace("/tmp/state.tmp", "/tmp/state")',
    '    time.sleep(0.05)',
  ].join('\n'))
  await sbx.commands.run('python3 /tmp/count.py', { background: true })
  for (let i = 0; i < 200; i++) {
    const r = await sbx.commands.run('cat /tmp/state 2>/dev/null || true')
    if (r.stdout.includes(':')) return r.stdout.trim().split(':')
    await new Promise((res) => setTimeout(res, 50))
  }
  throw new Error('counter did not start')
}

async function readState(sbx) {
  const s = await sbx.files.read('/tmp/state')
  const [token, n] = s.trim().split(':')
  return [token, Number(n)]
}

test('pause, list paused, connect resumes with memory intact', { timeout: 120_000 }, async () => {
  const sbx = await make()
  const [token] = await startCounter(sbx)
  await sbx.files.write('/home/user/before-pause.txt', 'kept')
  const [, n] = await readState(sbx)
  let t = Date.now()
  assert.equal(await sbx.pause(), true)
  console.log(`pause: ${Date.now() - t} ms`)
  const info = await Sandbox.getInfo(sbx.sandboxId)
  assert.equal(info.state, 'paused')

  const paused = []
  const pager = Sandbox.list({ query: { state: ['paused'] }, limit: 100 })
  while (pager.hasNext) paused.push(...(await pager.nextItems()))
  assert.ok(paused.some((s) => s.sandboxId === sbx.sandboxId), 'listed as paused')

  t = Date.now()
  const again = await Sandbox.connect(sbx.sandboxId)
  console.log(`connect (resume): ${Date.now() - t} ms`)
  assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'running')
  assert.equal(await again.files.read('/home/user/before-pause.txt'), 'kept')
  await new Promise((res) => setTimeout(res, 300))
  const [token2, n2] = await readState(again)
  assert.equal(token2, token, 'the variable in memory survived')
  assert.ok(n2 > n, `the counter continued (${n} → ${n2})`)
})

test('snapshot: create, list, create from it after the source is gone, delete', { timeout: 120_000 }, async () => {
  const sbx = await make()
  await sbx.files.write('/home/user/v.txt', 'snapshotted')
  const snap = await sbx.createSnapshot()
  assert.ok(snap.snapshotId)
  await sbx.files.write('/home/user/v.txt', 'after')
  await sbx.kill()
  created.delete(sbx.sandboxId)

  const all = []
  const pager = Sandbox.listSnapshots({ sandboxId: sbx.sandboxId, limit: 1 })
  while (pager.hasNext) all.push(...(await pager.nextItems()))
  assert.ok(all.some((s) => s.snapshotId === snap.snapshotId), 'snapshot listed after its sandbox died')

  const fromSnap = await Sandbox.create(snap.snapshotId, { timeoutMs: 60_000 })
  created.add(fromSnap.sandboxId)
  assert.equal(await fromSnap.files.read('/home/user/v.txt'), 'snapshotted')

  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
  await assert.rejects(Sandbox.create(snap.snapshotId, { timeoutMs: 60_000 }))
})

test('fork: copies inherit the past and are isolated', { timeout: 120_000 }, async () => {
  const sbx = await make()
  await sbx.files.write('/home/user/base.txt', 'shared past')
  const t = Date.now()
  const forks = await sbx.fork({ count: 2 })
  console.log(`fork x2: ${Date.now() - t} ms`)
  assert.equal(forks.length, 2)
  for (const f of forks) {
    assert.ok(!(f instanceof Error), `fork failed: ${f}`)
    created.add(f.sandboxId)
    assert.equal(await f.files.read('/home/user/base.txt'), 'shared past')
    await f.files.write('/home/user/own.txt', f.sandboxId)
  }
  assert.equal(await forks[0].files.read('/home/user/own.txt'), forks[0].sandboxId)
  assert.equal(await forks[1].files.read('/home/user/own.txt'), forks[1].sandboxId)
  assert.equal(await sbx.files.exists('/home/user/own.txt'), false, 'source untouched')
  assert.equal(await sbx.isRunning(), true)
})

test('novita-sandbox Sandbox.clone with count 2 returns snapshotTemplateId', { timeout: 120_000 }, async () => {
  const { Sandbox: NSandbox } = await import('novita-sandbox')
  const src = await make()
  await src.files.write('/home/user/n.txt', 'novita')
  const res = await NSandbox.clone(src.sandboxId, { count: 2 })
  assert.equal(res.count, 2)
  assert.ok(res.snapshotTemplateId, 'snapshotTemplateId returned')
  assert.equal(res.sandboxes.length, 2)
  for (const c of res.sandboxes) {
    created.add(c.sandboxId)
    const r = await c.commands.run('cat /home/user/n.txt')
    assert.equal(r.stdout, 'novita')
  }
})
