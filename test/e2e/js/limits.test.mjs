// End-to-end tests of issue 12 (limits and faults) with the unmodified npm
// `e2b` client: requests beyond the host are refused, and a sandbox whose
// runsc process dies is known dead at once. Run by test/e2e/e2e_test.go.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, readdirSync } from 'node:fs'
import { Sandbox } from 'e2b'
import { sleep, run } from './helpers.mjs'

const T = { timeout: 60_000 }
const API_URL = process.env.E2B_API_URL
const API_KEY = process.env.E2B_API_KEY
const DATA_DIR = process.env.FORKBOX_DATA_DIR
assert.ok(API_URL && API_KEY && DATA_DIR, 'run through `go test ./test/e2e` (E2B_API_URL, E2B_API_KEY, FORKBOX_DATA_DIR)')

const created = new Set()
after(async () => {
  for (const id of created) await Sandbox.kill(id).catch(() => {})
})

async function api(method, path, body) {
  const resp = await fetch(API_URL + path, {
    method,
    headers: { 'X-API-Key': API_KEY, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await resp.text()
  return { status: resp.status, body: text ? JSON.parse(text) : null }
}

// createSized creates a sandbox with forkbox's size fields (the E2B client
// has none: E2B sizes come from the template) and connects the client.
async function createSized(fields) {
  const r = await api('POST', '/sandboxes', { templateID: 'base', timeout: 120, ...fields })
  assert.equal(r.status, 201, JSON.stringify(r.body))
  created.add(r.body.sandboxID)
  return Sandbox.connect(r.body.sandboxID)
}

test('requests beyond the host are refused with 400 naming the limit', T, async () => {
  for (const [field, value, flag] of [
    ['memoryMB', 100_000_000, '--max-sandbox-memory'],
    ['cpuCount', 100_000, '--max-sandbox-cpus'],
    ['diskSizeMB', 1_000_000_000, '--max-sandbox-disk'],
    ['memoryMB', -5, 'must not be negative'],
  ]) {
    const r = await api('POST', '/sandboxes', { templateID: 'base', [field]: value })
    assert.equal(r.status, 400, `${field}=${value}: ${JSON.stringify(r.body)}`)
    assert.equal(r.body.code, 400)
    assert.match(r.body.message, new RegExp(flag.replace(/-/g, '\\-')), `${field}=${value}: ${r.body.message}`)
  }
})

// sees reads what sandbox sbx sees of its size: nproc, os.cpu_count(),
// /proc/cpuinfo's processors, MemTotal (MiB) and the sizes of / and /tmp
// (MiB; one filesystem, as a VM's disk).
async function sees(sbx) {
  const out = (await sbx.commands.run(
    "nproc; python3 -c 'import os; print(os.cpu_count())'; grep -c ^processor /proc/cpuinfo; " +
    "awk '/^MemTotal/ {print int($2/1024)}' /proc/meminfo; df -m --output=size / /tmp | tail -n +2")).stdout
  const [nproc, cpus, cpuinfo, memMiB, root, tmp] = out.trim().split(/\s+/).map(Number)
  return { nproc, cpus, cpuinfo, memMiB, root, tmp }
}

test('a sandbox sees the size it was given: pooled, sized (disk and CPUs too), forked', { timeout: 120_000 }, async () => {
  const pooled = await createSized({}) // base: 2 CPUs, 512 MiB, 1024 MiB disk
  assert.deepEqual(await sees(pooled), { nproc: 2, cpus: 2, cpuinfo: 2, memMiB: 512, root: 1024, tmp: 1024 })
  // Another disk size and CPU count than the template's image: a restore
  // keeps its image's, so they come from an image of that shape.
  const t0 = performance.now()
  const sized = await createSized({ cpuCount: 1, memoryMB: 300, diskSizeMB: 700 })
  console.log(`create of a new shape (its image made on the way, unless an earlier run of this build made it): ${Math.round(performance.now() - t0)} ms`)
  const want = { nproc: 1, cpus: 1, cpuinfo: 1, memMiB: 300, root: 700, tmp: 700 }
  assert.deepEqual(await sees(sized), want)
  const info = await api('GET', `/sandboxes/${sized.sandboxId}`)
  assert.equal(info.body.diskSizeMB, 700)
  assert.equal(info.body.cpuCount, 1)
  const t1 = performance.now()
  const again = await createSized({ cpuCount: 1, memoryMB: 256, diskSizeMB: 700 })
  console.log(`create of a known shape: ${Math.round(performance.now() - t1)} ms`)
  assert.deepEqual(await sees(again), { ...want, memMiB: 256 })
  const [copy] = await sized.fork({ count: 1 })
  created.add(copy.sandboxId)
  assert.deepEqual(await sees(copy), want, 'a fork')
  // ENOSPC at the asked size: / and /tmp share it.
  const dd = await run(sized, 'dd if=/dev/zero of=/home/user/a bs=1M count=400 && dd if=/dev/zero of=/tmp/b bs=1M count=400')
  assert.match(dd.stderr, /No space left on device/, JSON.stringify(dd))
  const used = Number((await sized.commands.run('du -cm /home/user/a /tmp/b | tail -1 | cut -f1')).stdout.trim())
  assert.ok(used >= 690 && used <= 700, `${used} MiB written to a 700 MiB disk`)
  // A snapshot's size is its image's.
  const snap = await api('POST', `/sandboxes/${sized.sandboxId}/snapshots`, {})
  assert.equal(snap.status, 201, JSON.stringify(snap.body))
  const other = await api('POST', '/sandboxes', { templateID: snap.body.snapshotID, diskSizeMB: 900 })
  assert.equal(other.status, 400, JSON.stringify(other.body))
  assert.match(other.body.message, /diskSizeMB 900/)
})

// stillFine checks that sbx answers and is running after an abuse.
async function stillFine(sbx, after) {
  assert.equal((await sbx.commands.run('echo ok', { timeoutMs: 10_000 })).stdout, 'ok\n', `a command after ${after}`)
  const info = await api('GET', `/sandboxes/${sbx.sandboxId}`)
  assert.equal(info.body.state, 'running', `after ${after}: ${JSON.stringify(info.body)}`)
}

// The hog touches 16 MiB more each step and says how far it got.
const memoryHog = `python3 -c "
import sys
a = []
while True:
    a.append(b'x' * (16 << 20))
    print(len(a) * 16, flush=True)
"`

// The bomb forks (children exec sleep, so each costs little memory) until
// fork fails, reports the errno, and takes its children down.
const forkBomb = `python3 -c "
import os, signal
kids, out = [], 'no error'
try:
    while len(kids) < 20000:
        k = os.fork()
        if k == 0:
            os.execv('/bin/sleep', ['sleep', '60'])
        kids.append(k)
except OSError as e:
    out = 'errno %d' % e.errno
print(out, 'after', len(kids), flush=True)
for k in kids: os.kill(k, signal.SIGKILL)
for k in kids: os.waitpid(k, 0)
"`

test('memory hog, fork bomb and disk fill fail inside; the sandbox lives, pauses, snapshots and forks', { timeout: 150_000 }, async () => {
  const sbx = await createSized({ memoryMB: 300, diskSizeMB: 512 })
  let t = performance.now()
  const hog = await run(sbx, memoryHog, { timeoutMs: 60_000 })
  const reached = Number(hog.stdout.trim().split('\n').pop())
  console.log(`memory hog: exit ${hog.exitCode} at ${reached} MiB in ${Math.round(performance.now() - t)} ms; stderr ${JSON.stringify(hog.stderr.slice(-200))}`)
  // Its allocation fails: Python raises MemoryError (the guard lowered its
  // address-space limit as memory ran short), and the sandbox lives.
  assert.equal(hog.exitCode, 1, `the hog: ${JSON.stringify(hog)}`)
  assert.match(hog.stderr, /MemoryError/, `the hog: ${JSON.stringify(hog)}`)
  assert.ok(reached >= 150 && reached <= 300, `the hog was stopped at ${reached} MiB of a 300 MiB sandbox`)
  await stillFine(sbx, 'the memory hog')
  // Memory came back: a process may take it again.
  const big = await run(sbx, `python3 -c "b = bytearray(200 << 20); print('ok')"`)
  assert.equal(big.stdout.trim(), 'ok', JSON.stringify(big))

  t = performance.now()
  const bomb = await run(sbx, forkBomb, { timeoutMs: 90_000 })
  console.log(`fork bomb: ${bomb.stdout.trim()} in ${Math.round(performance.now() - t)} ms`)
  assert.match(bomb.stdout, /^errno 11 after \d+/, JSON.stringify(bomb))
  await stillFine(sbx, 'the fork bomb')

  for (const path of ['/home/user/fill', '/tmp/fill']) {
    const dd = await run(sbx, `dd if=/dev/zero of=${path} bs=1M count=600`)
    assert.notEqual(dd.exitCode, 0)
    assert.match(dd.stderr, /No space left on device/, JSON.stringify(dd))
    assert.match(dd.stderr, /^(50\d|51[0-2])\+[01] records out/m, `ENOSPC at the 512 MiB asked for: ${dd.stderr}`)
    await stillFine(sbx, `filling ${path}`)
    await sbx.commands.run(`rm -f ${path}`)
  }
  await sbx.commands.run('rm -f /home/user/fill /tmp/fill; echo kept > /home/user/kept')

  const paused = await api('POST', `/sandboxes/${sbx.sandboxId}/pause`)
  assert.equal(paused.status, 204, JSON.stringify(paused.body))
  const resumed = await Sandbox.connect(sbx.sandboxId)
  await stillFine(resumed, 'pause and resume')
  const snap = await api('POST', `/sandboxes/${sbx.sandboxId}/snapshots`, {})
  assert.equal(snap.status, 201, JSON.stringify(snap.body))
  const [copy] = await resumed.fork({ count: 1 })
  created.add(copy.sandboxId)
  assert.equal(await copy.files.read('/home/user/kept'), 'kept\n')
  await stillFine(copy, 'a fork')
})

// sentryPid finds the host pid of sandbox id's runsc sandbox process (the
// sentry): the runtime's handle names its runsc container, which runsc
// passes as the last argument of `runsc-sandbox … boot … <container>`.
function sentryPid(id) {
  const h = JSON.parse(readFileSync(`${DATA_DIR}/runtime/sandboxes/${id}/handle.json`, 'utf8'))
  const cid = h.container || h.id
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let argv
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean)
    } catch { continue }
    if (argv[0] === 'runsc-sandbox' && argv.includes('boot') && argv[argv.length - 1] === cid) return Number(pid)
  }
  assert.fail(`no runsc-sandbox process for container ${cid}`)
}

test('a sandbox killed from outside is killed with its reason within 1 s; commands fail within 2 s', T, async () => {
  const sbx = await createSized({})
  const id = sbx.sandboxId
  assert.equal((await sbx.commands.run('echo up')).stdout.trim(), 'up')
  const inFlight = sbx.commands.run('sleep 50; echo never', { timeoutMs: 55_000 }).then(
    () => 'completed', (e) => e)
  await sleep(300) // the command is running
  const pid = sentryPid(id)
  const t0 = performance.now()
  process.kill(pid, 'SIGKILL')
  let info
  for (;;) {
    info = await api('GET', `/sandboxes/${id}`)
    if (info.status === 200 && info.body.state === 'killed') break
    assert.ok(performance.now() - t0 < 1000, `not killed 1 s after its sentry died: ${JSON.stringify(info)}`)
    await sleep(10)
  }
  const noticed = performance.now() - t0
  console.log(`sentry death → API reports killed in ${Math.round(noticed)} ms`)
  assert.equal(info.body.killReason, 'killed')
  assert.ok(info.body.killedAt, 'killedAt is set')
  const failed = await Promise.race([inFlight, sleep(2000).then(() => 'still running')])
  assert.ok(failed instanceof Error, `the command in flight: ${failed}`)
  console.log(`in-flight command failed ${Math.round(performance.now() - t0)} ms after the death: ${failed.message}`)
  const t1 = performance.now()
  const next = await sbx.commands.run('echo hi', { timeoutMs: 10_000 }).then(() => 'ran', (e) => e)
  assert.ok(next instanceof Error, `a command to a dead sandbox: ${next}`)
  assert.ok(performance.now() - t1 < 2000, `a command to a dead sandbox took ${Math.round(performance.now() - t1)} ms to fail`)
  const dp = await fetch(API_URL + '/health', { headers: { 'E2b-Sandbox-Id': id, 'E2b-Sandbox-Port': '49983' } })
  assert.equal(dp.status, 502)
  assert.deepEqual(await dp.json(), { message: 'The sandbox was not found', sandboxId: id, code: 502 })
  const logs = await api('GET', `/v2/sandboxes/${id}/logs`)
  assert.equal(logs.status, 200)
  assert.ok(logs.body.logs.some((l) => l.level === 'error' && l.message === 'sandbox died' && l.fields.reason === 'killed'),
    JSON.stringify(logs.body))
  const listed = await api('GET', '/v2/sandboxes')
  assert.ok(!listed.body.some((s) => s.sandboxID === id), 'a dead sandbox is not listed')
  created.delete(id)
})
