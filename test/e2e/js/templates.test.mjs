// End-to-end tests of E2B's template builder (Template() of the unmodified
// npm `e2b` SDK) against forkbox: builds on forkbox's base template (what
// e2bdev/base names), each step in a gVisor build sandbox, cached layers,
// start-ready templates, failures reported with their step, deletion.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync, mkdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { deleteTemplate } from './helpers.mjs'
import { Sandbox, Template, waitForPort, waitForURL, waitForProcess, waitForFile, waitForTimeout, BuildError } from 'e2b'

const T = { timeout: 300_000 }
const created = new Set()
const built = new Set()
const suffix = Date.now().toString(36)

after(async () => {
  for (const id of created) await Sandbox.kill(id).catch(() => {})
  for (const n of built) await deleteTemplate(n.split(':')[0]).catch(() => {})
})

// A build context with a file and a directory for copy().
const ctxDir = mkdtempSync(join(tmpdir(), 'fbx-tpl-'))
writeFileSync(join(ctxDir, 'hello.txt'), 'hello from the context\n')
mkdirSync(join(ctxDir, 'site'))
writeFileSync(join(ctxDir, 'site', 'index.html'), '<h1>forkbox template</h1>\n')

function app() {
  return Template({ fileContextPath: ctxDir })
    .setEnvs({ GREETING: 'hi there' })
    .runCmd('echo "$GREETING" > /tmp/greeting && id -un > /tmp/builder', { user: 'root' })
    .copy('hello.txt', '/opt/app/hello.txt', { user: 'root' })
    .setWorkdir('/opt/app')
    .runCmd('cp /tmp/greeting ./greeting && mkdir -p ./data && chown user ./data', { user: 'root' })
    .setUser('user')
    .runCmd('echo built-as-$(id -un) > /opt/app/data/who')
}

async function build(tpl, name, opts = {}) {
  const logs = []
  const t0 = performance.now()
  const res = await Template.build(tpl, name, { onBuildLogs: (e) => logs.push(e.message ?? String(e)), ...opts })
  const ms = performance.now() - t0
  built.add(name)
  console.log(`built ${name} in ${Math.round(ms)} ms`)
  return { res, logs, ms }
}

async function create(name) {
  const t0 = performance.now()
  const sbx = await Sandbox.create(name, { timeoutMs: 120_000 })
  created.add(sbx.sandboxId)
  console.log(`created ${sbx.sandboxId} from ${name} in ${Math.round(performance.now() - t0)} ms`)
  return sbx
}

test('Template(): RUN, COPY, ENV, WORKDIR, USER on the base template; sandboxes by name and name:tag', T, async () => {
  const name = `fbx-app-${suffix}`
  const { res, logs } = await build(app(), `${name}:v1`)
  assert.ok(res.templateId)
  assert.ok(logs.some((l) => l.includes('[3/7]')), 'logs name steps n/m')
  assert.equal(await Template.exists(name), true)
  assert.equal(await Template.exists(`nope-${suffix}`), false)
  for (const ref of [name, `${name}:v1`, res.templateId]) {
    const sbx = await create(ref)
    const r = await sbx.commands.run('pwd; id -un; echo "$GREETING"; cat greeting hello.txt data/who /tmp/builder')
    assert.equal(r.stdout, '/opt/app\nuser\nhi there\nhi there\nhello from the context\nbuilt-as-user\nroot\n')
    await sbx.kill()
    created.delete(sbx.sandboxId)
  }
})

test('an unchanged rebuild comes from cache in ≤ 2 s; skipCache rebuilds', T, async () => {
  const name = `fbx-app-${suffix}`
  const again = await build(app(), name)
  assert.ok(again.ms <= 2000, `cached rebuild took ${Math.round(again.ms)} ms`)
  assert.ok(again.logs.filter((l) => l.startsWith('CACHED')).length >= 3, again.logs.join('\n'))
  const forced = await build(app(), name, { skipCache: true })
  assert.ok(!forced.logs.some((l) => l.startsWith('CACHED [')), forced.logs.join('\n'))
})

test('a start command with waitForPort: the server answers right after Sandbox.create', T, async () => {
  const name = `fbx-web-${suffix}`
  const tpl = Template({ fileContextPath: ctxDir })
    .copy('site', '/srv/site/')
    .setStartCmd('cd /srv/site && python3 -m http.server 8080', waitForPort(8080))
  await build(tpl, name)
  const sbx = await create(name)
  const t0 = performance.now()
  const res = await fetch(`${process.env.E2B_SANDBOX_URL || process.env.E2B_API_URL}/`, {
    headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8080' },
  })
  assert.equal(res.status, 200)
  assert.match(await res.text(), /forkbox template/)
  console.log(`first HTTP 200 ${Math.round(performance.now() - t0)} ms after create`)
})

// lineOf is the line of this file holding marker (for the SDK's stack).
function lineOf(marker) {
  const lines = readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n')
  return lines.findIndex((l) => l.includes(marker) && !l.includes('lineOf(')) + 1
}

test('a failing step fails the build with its step; an unknown user fails with E2B\'s message', T, async () => {
  const name = `fbx-bad-${suffix}`
  const failing = Template().fromTemplate('base').runCmd('echo ok')
    .runCmd('exit 3') // STEP-TWO-FAILS
  await assert.rejects(build(failing, name), (e) => {
    assert.ok(e instanceof BuildError, String(e))
    assert.match(e.message, /failed to run command 'exit 3'/)
    // reason.step "2": the SDK shows the stack of the call that made step
    // 2 (its stack traces are base, then one per step).
    assert.match(e.stack, new RegExp(`templates\\.test\\.mjs:${lineOf('STEP-TWO-FAILS')}:`), e.stack)
    return true
  })
  await assert.rejects(build(Template().runCmd('whoami', { user: 'nosuchuser' }), name), (e) => {
    assert.match(e.message, /failed to run command 'whoami': command failed: unauthenticated: invalid username: 'nosuchuser'/)
    return true
  })
})

// Each start command gets ready only after 2 s: the template must be
// captured after its ready check passed, so the probe right after
// Sandbox.create sees what was ready (without the wait, the restored
// sandbox would still be 2 s from it).
const readyCases = [
  ['url', 'sleep 2 && cd /tmp && exec python3 -m http.server 8081', waitForURL('http://localhost:8081/'),
    'curl -s -o /dev/null -w "%{http_code}" http://localhost:8081/', '200'],
  ['process', 'sleep 2 && cp /bin/sleep /tmp/fbx-worker && exec /tmp/fbx-worker 1000', waitForProcess('fbx-worker'),
    'pgrep -c fbx-worker', '1\n'],
  ['file', 'sleep 2 && echo ready > /tmp/ready && exec sleep 1000', waitForFile('/tmp/ready'), 'cat /tmp/ready', 'ready\n'],
  ['timeout', 'sleep 2 && echo late > /tmp/late && exec sleep 1000', waitForTimeout(3000), 'cat /tmp/late', 'late\n'],
]

for (const [kind, start, ready, probe, want] of readyCases) {
  test(`ready helper ${kind}: the template is captured once it passes`, T, async () => {
    const name = `fbx-ready-${kind}-${suffix}`
    const { logs } = await build(Template().setStartCmd(start, ready), name)
    assert.ok(logs.some((l) => l.startsWith('Waiting for ready command: ')), logs.join('\n'))
    const sbx = await create(name)
    const r = await sbx.commands.run(probe)
    assert.equal(r.stdout, want)
    await sbx.kill()
    created.delete(sbx.sandboxId)
  })
}

test('deleting a template keeps its running sandboxes working', T, async () => {
  const name = `fbx-del-${suffix}`
  await build(Template().runCmd('echo kept > /tmp/kept', { user: 'root' }), name)
  const sbx = await create(name)
  await deleteTemplate(name)
  built.delete(name)
  assert.equal(await Template.exists(name), false)
  const r = await sbx.commands.run('cat /tmp/kept')
  assert.equal(r.stdout, 'kept\n')
  await assert.rejects(Sandbox.create(name, { timeoutMs: 30_000 }))
})

// poolOf reads forkbox_pool_sandboxes of a template from /metrics.
async function poolOf(templateId) {
  const res = await fetch(`${process.env.E2B_API_URL}/metrics`, { headers: { 'X-API-Key': process.env.E2B_API_KEY } })
  const m = (await res.text()).match(new RegExp(`^forkbox_pool_sandboxes\\{template="${templateId}"\\} (\\d+)`, 'm'))
  return m ? Number(m[1]) : 0
}

async function p50(label, fn) {
  const ms = []
  for (let i = 0; i < 7; i++) ms.push(await fn())
  ms.sort((a, b) => a - b)
  console.log(`${label}: p50 ${Math.round(ms[3])} ms (all: ${ms.map(Math.round).join(', ')})`)
  return ms[3]
}

test('create → first command from a built template (pooled, as base) and → first HTTP 200 from a start-ready one: p50 of 7', T, async () => {
  const name = `fbx-app-${suffix}`
  const { templateId } = await Template.build(app(), name)
  // Built user templates get a pool, as base has.
  const deadline = Date.now() + 20_000
  while ((await poolOf(templateId)) < 1) {
    assert.ok(Date.now() < deadline, `no pooled sandbox of ${name} (${templateId}) within 20 s`)
    await new Promise((r) => setTimeout(r, 200))
  }
  const firstCommand = (tpl, cmd, want) => async () => {
    const t0 = performance.now()
    const sbx = await Sandbox.create(tpl, { timeoutMs: 60_000 })
    created.add(sbx.sandboxId)
    const r = await sbx.commands.run(cmd)
    const ms = performance.now() - t0
    assert.equal(r.stdout, want)
    await sbx.kill()
    created.delete(sbx.sandboxId)
    return ms
  }
  await p50(`create → first command from ${name}`, firstCommand(name, 'cat greeting', 'hi there\n'))
  await p50('create → first command from base', firstCommand('base', 'echo hi', 'hi\n'))
  await p50(`create → first HTTP 200 from fbx-web-${suffix}`, async () => {
    const t0 = performance.now()
    const sbx = await Sandbox.create(`fbx-web-${suffix}`, { timeoutMs: 60_000 })
    created.add(sbx.sandboxId)
    const res = await fetch(`${process.env.E2B_SANDBOX_URL || process.env.E2B_API_URL}/`, {
      headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8080' },
    })
    const ms = performance.now() - t0
    assert.equal(res.status, 200)
    await res.text()
    await sbx.kill()
    created.delete(sbx.sandboxId)
    return ms
  })
})
