// The stateful code interpreter with the unmodified @e2b/code-interpreter
// client: state across calls, final-expression results, streaming
// callbacks, errors and recovery, contexts, envs, bash, a matplotlib PNG,
// and a variable that survives pause/resume and a fork.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'

let sbx
const extra = []
before(async () => {
  const t = Date.now()
  sbx = await Sandbox.create({ timeoutMs: 300_000 })
  console.log(`create code-interpreter-v1: ${Date.now() - t} ms`)
})
after(async () => {
  for (const s of [sbx, ...extra]) await s?.kill().catch(() => {})
})

test('state persists across calls and the final expression is the result', async () => {
  const t = Date.now()
  const first = await sbx.runCode('import math\nx = 20\ndef f(y):\n    return y + 2\nf(x) * 2')
  console.log(`first runCode: ${Date.now() - t} ms`)
  assert.equal(first.text, '44')
  assert.equal((await sbx.runCode('x + math.floor(2.5)')).text, '22')
  const times = []
  for (let i = 0; i < 10; i++) {
    const s = Date.now()
    assert.equal((await sbx.runCode('1+1')).text, '2')
    times.push(Date.now() - s)
  }
  times.sort((a, b) => a - b)
  console.log(`runCode('1+1') median: ${times[5]} ms`)
})

test('stdout and stderr stream through callbacks in order', async () => {
  const out = []
  const err = []
  const ex = await sbx.runCode('import sys, time\nprint("one")\ntime.sleep(0.3)\nprint("two")\nprint("bad", file=sys.stderr)', {
    onStdout: (m) => out.push(m.line),
    onStderr: (m) => err.push(m.line),
  })
  assert.deepEqual(out.map((l) => l.trim()), ['one', 'two'])
  assert.deepEqual(err.map((l) => l.trim()), ['bad'])
  assert.deepEqual(ex.logs.stdout.map((l) => l.trim()), ['one', 'two'])
})

test('an exception is reported and the context stays usable', async () => {
  const ex = await sbx.runCode('x = 5\n1 / 0')
  assert.equal(ex.error.name, 'ZeroDivisionError')
  assert.match(ex.error.traceback, /ZeroDivisionError/)
  assert.equal((await sbx.runCode('x')).text, '5')
})

test('contexts are independent; restart and remove work', async () => {
  const ctx = await sbx.createCodeContext()
  await sbx.runCode('only_here = 1', { context: ctx })
  assert.equal((await sbx.runCode('only_here', { context: ctx })).text, '1')
  const elsewhere = await sbx.runCode('only_here')
  assert.equal(elsewhere.error?.name, 'NameError')
  const list = await sbx.listCodeContexts()
  assert.ok(list.some((c) => c.id === ctx.id))
  await sbx.restartCodeContext(ctx)
  assert.equal((await sbx.runCode('only_here', { context: ctx })).error?.name, 'NameError')
  await sbx.removeCodeContext(ctx)
  assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id))
})

test('envs apply to one execution', async () => {
  const ex = await sbx.runCode('import os\nos.environ.get("FB_ONE")', { envs: { FB_ONE: 'set' } })
  assert.equal(ex.text, 'set')
  assert.equal((await sbx.runCode('import os\nos.environ.get("FB_ONE", "unset")')).text, 'unset')
})

test('bash runs as a language', async () => {
  const ex = await sbx.runCode('echo hi-from-bash; whoami', { language: 'bash' })
  assert.deepEqual(ex.logs.stdout.join('').trim().split('\n'), ['hi-from-bash', 'user'])
})

test('a matplotlib figure comes back as a PNG; a DataFrame as HTML', async () => {
  const ex = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()')
  const png = ex.results.find((r) => r.png)
  assert.ok(png, 'a PNG result')
  assert.equal(Buffer.from(png.png, 'base64').subarray(1, 4).toString(), 'PNG')
  const df = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2]})')
  assert.match(df.results[0].html, /<table/)
})

test('a variable survives pause/resume and a fork', async () => {
  await sbx.runCode('survivor = "kept in memory"')
  await sbx.pause()
  const resumed = await Sandbox.connect(sbx.sandboxId)
  assert.equal((await resumed.runCode('survivor')).text, 'kept in memory')
  const [fork] = await resumed.fork({ count: 1 })
  assert.ok(!(fork instanceof Error), String(fork))
  extra.push(fork)
  assert.equal((await fork.runCode('survivor')).text, 'kept in memory')
  await fork.runCode('survivor = "changed in the fork"')
  assert.equal((await resumed.runCode('survivor')).text, 'kept in memory')
})
