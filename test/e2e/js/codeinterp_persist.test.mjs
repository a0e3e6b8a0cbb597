// Interpreter state of every language (python, js, ts, r, java, bash) with
// the unmodified @e2b/code-interpreter client across pause/resume, a fork
// into two copies that each go their own way, a snapshot made into a new
// sandbox, and a rollback. All of it lives in the kernels' memory; nothing
// is saved or replayed.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'

const live = []
after(async () => {
  for (const s of live) await s?.kill().catch(() => {})
})

// Per language: a cell setting state to a tag, and one reading it back as
// the text the client shows.
const langs = {
  python: { set: (t) => `import fractions\nv = "${t}"`, get: 'v + str(fractions.Fraction(1, 1))', want: (t) => `${t}1` },
  js: { set: (t) => `var v = "${t}"\nvar jsPath = require("path")`, get: 'jsPath.join(v)', want: (t) => t },
  ts: { set: (t) => `var v: string = "${t}"\nfunction twice(s: string): string { return s + s }`, get: 'twice(v)', want: (t) => t + t },
  r: { set: (t) => `v <- "${t}"`, get: 'v', want: (t) => `[1] "${t}"` },
  java: { set: (t) => `import java.util.*;\nString v = "${t}";`, get: 'List.of(v).get(0)', want: (t) => t },
  bash: { set: (t) => `V=${t}; cd /tmp`, get: 'echo "$V $(pwd)"', want: (t) => `${t} /tmp\n` },
}

const shown = (ex) => ex.text ?? (ex.results.length ? ex.results.map((r) => r.text).join('|') : ex.logs.stdout.join(''))

async function setAll(sbx, tag) {
  for (const [language, l] of Object.entries(langs)) {
    const ex = await sbx.runCode(l.set(tag), { language })
    assert.equal(ex.error, undefined, `${language}: ${JSON.stringify(ex.error)}`)
  }
}

async function checkAll(sbx, tag, where) {
  for (const [language, l] of Object.entries(langs)) {
    const ex = await sbx.runCode(l.get, { language })
    assert.equal(ex.error, undefined, `${where}, ${language}: ${JSON.stringify(ex.error)}`)
    assert.equal(shown(ex), l.want(tag), `${where}, ${language}`)
  }
}

const api = (method, path, body) =>
  fetch(process.env.E2B_API_URL + path, {
    method,
    headers: { 'X-API-Key': process.env.E2B_API_KEY, 'Content-Type': 'application/json' },
    body: body && JSON.stringify(body),
  })

test('every language keeps its state across pause/resume, a fork into two diverging copies, snapshot → new sandbox and rollback', async () => {
  const src = await Sandbox.create({ timeoutMs: 600_000 })
  live.push(src)
  await setAll(src, 'orig')
  const count = (await src.runCode('1')).executionCount

  await src.pause()
  const resumed = await Sandbox.connect(src.sandboxId)
  await checkAll(resumed, 'orig', 'after resume')
  assert.equal((await resumed.runCode('2')).executionCount, count + 2, 'python execution count after resume and one check')

  const forks = await resumed.fork({ count: 2 })
  for (const f of forks) {
    assert.ok(!(f instanceof Error), String(f))
    live.push(f)
  }
  await checkAll(forks[0], 'orig', 'fork 0 before it changes')
  await setAll(forks[0], 'fork0')
  await setAll(forks[1], 'fork1')
  await checkAll(forks[0], 'fork0', 'fork 0')
  await checkAll(forks[1], 'fork1', 'fork 1')
  await checkAll(resumed, 'orig', 'the source after its forks changed')

  const snap = await resumed.createSnapshot()
  await setAll(resumed, 'later')
  const fromSnap = await Sandbox.create(snap.snapshotId, { timeoutMs: 300_000 })
  live.push(fromSnap)
  await checkAll(fromSnap, 'orig', 'snapshot → new sandbox')

  const rb = await api('POST', `/sandboxes/${resumed.sandboxId}/rollback`, { snapshotID: snap.snapshotId })
  assert.equal(rb.status, 200, await rb.text())
  await checkAll(resumed, 'orig', 'after rollback')
  await setAll(fromSnap, 'snapcopy')
  await checkAll(resumed, 'orig', 'the rolled-back sandbox after the snapshot copy changed')
  await checkAll(fromSnap, 'snapcopy', 'the snapshot copy')
  await Sandbox.deleteSnapshot(snap.snapshotId).catch(() => {})
})
