// End-to-end tests of issue 12 (limits and faults) with the unmodified npm
// `e2b` client: requests beyond the host are refused, and a sandbox whose
// runsc process dies is known dead at once. Run by test/e2e/e2e_test.go.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, readdirSync } from 'node:fs'
import { Sandbox } from 'e2b'
import { sleep } from './helpers.mjs'

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
