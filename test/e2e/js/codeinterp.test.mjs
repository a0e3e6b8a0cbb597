// The stateful code interpreter with the unmodified @e2b/code-interpreter
// client: state across calls, final-expression results, streaming
// callbacks, errors and recovery, contexts, envs, bash, a matplotlib PNG,
// and a variable that survives pause/resume and a fork. Python runs in a
// real IPython kernel: magics, shell escapes, IPython's execution counts,
// display(), PIL images, charts and DataFrame data.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'
import { chartOf } from './helpers.mjs'

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

test('IPython syntax: !shell, magics, executionCount', async () => {
  const ctx = await sbx.createCodeContext()
  const pwd = await sbx.runCode('!pwd', { context: ctx })
  assert.equal(pwd.error, undefined)
  assert.equal(pwd.logs.stdout.join('').trim(), '/home/user')
  assert.equal(pwd.executionCount, 1)
  const timeit = await sbx.runCode('%timeit -n1 -r1 sum(range(10))', { context: ctx })
  assert.match(timeit.logs.stdout.join(''), /per loop/)
  assert.equal(timeit.executionCount, 2)
  const bash = await sbx.runCode('%%bash\necho $((6*7))', { context: ctx })
  assert.equal(bash.logs.stdout.join(''), '42\n')
  const failed = await sbx.runCode('1/0', { context: ctx })
  assert.equal(failed.executionCount, 4)
  // IPython's own input history, with the cell magic as IPython rewrote it.
  assert.match((await sbx.runCode('In[3]', { context: ctx })).text, /run_cell_magic\('bash'/)
  await sbx.removeCodeContext(ctx)
})

test('cwd per context and envs per execution', async () => {
  const ctx = await sbx.createCodeContext({ cwd: '/tmp' })
  assert.equal(ctx.cwd, '/tmp')
  assert.equal((await sbx.runCode('import os\nos.getcwd()', { context: ctx })).text, '/tmp')
  const ex = await sbx.runCode('import subprocess\nsubprocess.run("echo $FB_CTX", shell=True)\nos.environ["FB_CTX"]', {
    context: ctx,
    envs: { FB_CTX: 'only-now' },
  })
  assert.equal(ex.text, 'only-now')
  assert.equal(ex.logs.stdout.join(''), 'only-now\n')
  assert.equal((await sbx.runCode('os.environ.get("FB_CTX", "gone")', { context: ctx })).text, 'gone')
  await sbx.removeCodeContext(ctx)
})

test('display() in a loop yields one result per call; the value is the main result', async () => {
  const ex = await sbx.runCode('from IPython.display import display, HTML\nfor i in range(3):\n    display(i)\ndisplay(HTML("<b>x</b>"))\n"done"')
  assert.deepEqual(ex.results.map((r) => r.text), ['0', '1', '2', '<IPython.core.display.HTML object>', 'done'])
  assert.equal(ex.results[3].html, '<b>x</b>')
  assert.deepEqual(ex.results.map((r) => r.isMainResult), [false, false, false, false, true])
  assert.equal(ex.text, 'done')
})

test('a PIL image returned, shown or saved comes back as png', async () => {
  await sbx.runCode('from PIL import Image\nimg = Image.new("RGB", (4, 4), "red")')
  for (const code of ['img', 'img.show()', 'img.save("/tmp/red.png")']) {
    const ex = await sbx.runCode(code)
    assert.equal(ex.error, undefined, code)
    assert.equal(ex.results.length, 1, code)
    assert.equal(Buffer.from(ex.results[0].png, 'base64').subarray(1, 4).toString(), 'PNG', code)
  }
})

test('a DataFrame has data (ISO timestamps) beside html and text', async () => {
  const ex = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "t": pd.to_datetime(["2024-01-01", "2024-01-02"])})')
  const r = ex.results[0]
  assert.match(r.html, /<table/)
  assert.match(r.text, /2024-01-01/)
  assert.deepEqual(r.data, { a: [1, 2], t: ['2024-01-01T00:00:00', '2024-01-02T00:00:00'] })
})

test('matplotlib figures carry chart data of every type', async () => {
  await sbx.runCode('import matplotlib.pyplot as plt')
  const chart = (code) => chartOf(sbx, code)
  const line = await chart('plt.plot([1, 2], [3, 4], label="l")\nplt.title("T")\nplt.xlabel("time (s)")')
  assert.equal(line.type, 'line')
  assert.equal(line.title, 'T')
  assert.equal(line.x_unit, 's')
  assert.equal(line.x_scale, 'linear')
  assert.ok(Array.isArray(line.x_ticks) && Array.isArray(line.y_tick_labels))
  assert.deepEqual(line.elements, [{ label: 'l', points: [[1, 3], [2, 4]] }])
  const scatter = await chart('plt.scatter([1, 2], [10, 100])\nplt.yscale("log")')
  assert.equal(scatter.type, 'scatter')
  assert.equal(scatter.y_scale, 'log')
  const bar = await chart('plt.bar(["a", "b"], [5, 6], label="g")')
  assert.deepEqual(bar.elements, [{ label: 'a', group: 'g', value: 5 }, { label: 'b', group: 'g', value: 6 }])
  const pie = await chart('plt.pie([1, 1], labels=["x", "y"])')
  assert.deepEqual(pie.elements.map((e) => [e.label, e.angle, e.radius]), [['x', 180, 1], ['y', 180, 1]])
  const box = await chart('plt.boxplot([[1, 2, 3, 4, 5, 20]], labels=["A"], patch_artist=True)')
  assert.equal(box.type, 'box_and_whisker')
  assert.deepEqual(box.elements[0], { label: 'A', min: 1, first_quartile: 2.25, median: 3.5, third_quartile: 4.75, max: 5, outliers: [20] })
  const sup = await chart('fig, (a, b) = plt.subplots(2)\na.plot([1, 2])\nb.bar(["p"], [3])\nfig.suptitle("S")')
  assert.equal(sup.type, 'superchart')
  assert.equal(sup.title, 'S')
  assert.deepEqual(sup.elements.map((e) => e.type), ['line', 'bar'])
})

test('contexts listing shows the default Python kernel', async () => {
  const list = await sbx.listCodeContexts()
  assert.ok(list.some((c) => c.language === 'python'), JSON.stringify(list))
})

test('code that kills its kernel gets an error and a working kernel next', async () => {
  const ctx = await sbx.createCodeContext()
  const ex = await sbx.runCode('import os\nos._exit(1)', { context: ctx })
  assert.equal(ex.error?.name, 'DeadKernelError')
  const next = await sbx.runCode('1 + 1', { context: ctx })
  assert.equal(next.text, '2')
  assert.equal(next.executionCount, 1)
  await sbx.removeCodeContext(ctx)
})

test('a timeout interrupts the cell; the state stays', async () => {
  await sbx.runCode('kept = "yes"')
  const t = Date.now()
  await assert.rejects(sbx.runCode('import time\ntime.sleep(60)', { timeoutMs: 2000 }))
  assert.ok(Date.now() - t < 20_000)
  const after = await sbx.runCode('kept')
  assert.equal(after.text, 'yes')
  assert.ok(Date.now() - t < 20_000, 'the interrupted cell did not block the next one')
})

test('a variable survives pause/resume and a fork', async () => {
  await sbx.runCode('survivor = "kept in memory"\nimport statistics')
  const before = (await sbx.runCode('1')).executionCount
  await sbx.pause()
  const resumed = await Sandbox.connect(sbx.sandboxId)
  const again = await resumed.runCode('survivor + str(statistics.mean([1, 3]))')
  assert.equal(again.text, 'kept in memory2')
  assert.equal(again.executionCount, before + 1)
  const [fork] = await resumed.fork({ count: 1 })
  assert.ok(!(fork instanceof Error), String(fork))
  extra.push(fork)
  assert.equal((await fork.runCode('survivor')).text, 'kept in memory')
  await fork.runCode('survivor = "changed in the fork"')
  assert.equal((await resumed.runCode('survivor')).text, 'kept in memory')
})

test('interpreter state survives snapshot → new sandbox, and rollback restores it', async () => {
  const api = (method, path, body) =>
    fetch(process.env.E2B_API_URL + path, {
      method,
      headers: { 'X-API-Key': process.env.E2B_API_KEY, 'Content-Type': 'application/json' },
      body: body && JSON.stringify(body),
    })
  await sbx.runCode('import fractions\nstate = "v1"\nf = open("/tmp/open.txt", "w+")\nf.write("kept")')
  const count = (await sbx.runCode('2')).executionCount
  const snap = await sbx.createSnapshot()
  await sbx.runCode('state = "v2"')
  const fromSnap = await Sandbox.create(snap.snapshotId, { timeoutMs: 60_000 })
  extra.push(fromSnap)
  const there = await fromSnap.runCode('f.seek(0)\n(state, str(fractions.Fraction(1, 2)), f.read())')
  assert.equal(there.text, "('v1', '1/2', 'kept')")
  assert.equal(there.executionCount, count + 1)
  const rb = await api('POST', `/sandboxes/${sbx.sandboxId}/rollback`, { snapshotID: snap.snapshotId })
  assert.equal(rb.status, 200, await rb.text())
  const back = await sbx.runCode('state')
  assert.equal(back.text, 'v1')
  assert.equal(back.executionCount, count + 1)
  await sbx.runCode('state = "diverged"')
  assert.equal((await fromSnap.runCode('state')).text, 'v1')
  await Sandbox.deleteSnapshot(snap.snapshotId).catch(() => {})
})

test('JavaScript: state across calls, envs, errors, cwd of its context; listed by default', async () => {
  const list = await sbx.listCodeContexts()
  assert.ok(list.some((c) => c.language === 'javascript'), JSON.stringify(list))
  const first = await sbx.runCode('const fb = 20\nconsole.log("js out")\nfb * 2 + 2', { language: 'js' })
  assert.equal(first.text, '42')
  assert.deepEqual(first.logs.stdout, ['js out\n'])
  assert.equal((await sbx.runCode('fb + 1', { language: 'javascript' })).text, '21')
  assert.equal((await sbx.runCode('process.env.FB_JS', { language: 'js', envs: { FB_JS: 'yes' } })).text, 'yes')
  assert.equal((await sbx.runCode('String(process.env.FB_JS)', { language: 'js' })).text, 'undefined')
  const err = await sbx.runCode('null.x', { language: 'js' })
  assert.equal(err.error?.name, 'TypeError')
  // A fresh sandbox: forking one that was rolled back fails on main today
  // (copies=0 failed=1, reported separately), which is not the kernel's doing.
  const jsb = await Sandbox.create({ timeoutMs: 120_000 })
  extra.push(jsb)
  await jsb.runCode('const kept = 21', { language: 'js' })
  const [fork] = await jsb.fork({ count: 1 })
  assert.ok(!(fork instanceof Error), String(fork))
  extra.push(fork)
  assert.equal((await fork.runCode('kept + 1', { language: 'js' })).text, '22')
  const ctx = await sbx.createCodeContext({ language: 'js', cwd: '/tmp' })
  assert.equal((await sbx.runCode('process.cwd()', { context: ctx })).text, '/tmp')
  assert.equal((await sbx.runCode('typeof fb', { context: ctx })).text, 'undefined')
  await sbx.removeCodeContext(ctx)
})

test('TypeScript: transpiled, its own kernel, state across calls', async () => {
  const first = await sbx.runCode('interface P { n: number }\nconst p: P = { n: 20 }\np.n * 2 + 2', { language: 'ts' })
  assert.equal(first.text, '42')
  assert.equal((await sbx.runCode('const q: number = p.n + 1\nq', { language: 'typescript' })).text, '21')
  assert.equal((await sbx.runCode('typeof p', { language: 'js' })).text, 'undefined')
})

test('an unknown language answers 400 (E2B: 500)', async () => {
  await assert.rejects(sbx.runCode('x', { language: 'cobol' }), (e) => /^400/.test(String(e?.message)))
})

test('R: IRkernel keeps state, maps errors, applies envs and a context cwd', async () => {
  // IRkernel shows values as display_data, so (as on E2B) they are results
  // that are not the main one: read them from results, not .text.
  const value = (ex) => ex.results.map((r) => r.text).join('|')
  const first = await sbx.runCode('fb <- 20\ncat("r out\\n")\nfb * 2 + 2', { language: 'r' })
  assert.equal(value(first), '[1] 42')
  assert.deepEqual(first.logs.stdout, ['r out\n'])
  assert.equal(value(await sbx.runCode('fb + 1', { language: 'r' })), '[1] 21')
  assert.equal(value(await sbx.runCode('Sys.getenv("FB_R")', { language: 'r', envs: { FB_R: 'yes' } })), '[1] "yes"')
  assert.equal(value(await sbx.runCode('Sys.getenv("FB_R", "unset")', { language: 'r' })), '[1] "unset"')
  const err = await sbx.runCode('stop("r failed")', { language: 'r' })
  assert.equal(err.error?.name, 'ERROR')
  assert.match(err.error?.value, /r failed/)
  const ctx = await sbx.createCodeContext({ language: 'r', cwd: '/tmp' })
  assert.equal(value(await sbx.runCode('getwd()', { context: ctx })), '[1] "/tmp"')
  assert.equal(value(await sbx.runCode('exists("fb")', { context: ctx })), '[1] FALSE')
  await sbx.removeCodeContext(ctx)
})

test('bash: a Jupyter kernel with state, exit codes as errors, envs and a context cwd', async () => {
  await sbx.runCode('cd /tmp\nFB_B=20\nfb() { echo "fb:$1"; }', { language: 'bash' })
  const ex = await sbx.runCode('pwd; echo $((FB_B + 1)); fb arg', { language: 'bash' })
  assert.equal(ex.logs.stdout.join(''), '/tmp\n21\nfb:arg\n')
  assert.equal((await sbx.runCode('echo "[$FB_ENV]"', { language: 'bash', envs: { FB_ENV: 'yes' } })).logs.stdout.join(''), '[yes]\n')
  assert.equal((await sbx.runCode('echo "[$FB_ENV]"', { language: 'bash' })).logs.stdout.join(''), '[]\n')
  const err = await sbx.runCode('echo before; false', { language: 'bash' })
  assert.equal(err.error?.value, '1')
  assert.equal(err.logs.stdout.join(''), 'before\n')
  const ctx = await sbx.createCodeContext({ language: 'bash', cwd: '/home' })
  assert.equal((await sbx.runCode('pwd; echo "[$FB_B]"', { context: ctx })).logs.stdout.join(''), '/home\n[]\n')
  await sbx.removeCodeContext(ctx)
})

test('Java: jshell keeps state, maps errors and applies envs', async () => {
  const first = await sbx.runCode('import java.util.*;\nint fb = 20;\nSystem.out.println("java out");\nfb * 2 + 2', { language: 'java' })
  assert.equal(first.text, '42')
  assert.deepEqual(first.logs.stdout, ['java out\n'])
  assert.equal((await sbx.runCode('List.of(fb, fb + 1).get(1)', { language: 'java' })).text, '21')
  assert.equal((await sbx.runCode('System.getenv("FB_J")', { language: 'java', envs: { FB_J: 'yes' } })).text, 'yes')
  assert.equal((await sbx.runCode('String.valueOf(System.getenv("FB_J"))', { language: 'java' })).text, 'null')
  const err = await sbx.runCode('int z = 1 / 0;', { language: 'java' })
  assert.equal(err.error?.name, 'java.lang.ArithmeticException')
  assert.equal(err.error?.value, '/ by zero')
  assert.equal((await sbx.runCode('nope + 1', { language: 'java' })).error?.name, 'CompilationException')
  assert.equal((await sbx.runCode('fb', { language: 'java' })).text, '20')
})

test('R, Java and bash state survives pause/resume and a fork', async () => {
  const s = await Sandbox.create({ timeoutMs: 180_000 })
  extra.push(s)
  await s.runCode('kept <- 41', { language: 'r' })
  await s.runCode('String kept = "java kept";', { language: 'java' })
  await s.runCode('KEPT=bash-kept', { language: 'bash' })
  await s.pause()
  const resumed = await Sandbox.connect(s.sandboxId)
  assert.equal((await resumed.runCode('kept + 1', { language: 'r' })).results[0]?.text, '[1] 42')
  assert.equal((await resumed.runCode('kept', { language: 'java' })).text, 'java kept')
  assert.equal((await resumed.runCode('echo $KEPT', { language: 'bash' })).logs.stdout.join(''), 'bash-kept\n')
  const [fork] = await resumed.fork({ count: 1 })
  assert.ok(!(fork instanceof Error), String(fork))
  extra.push(fork)
  await fork.runCode('kept = "changed in the fork";', { language: 'java' })
  assert.equal((await fork.runCode('kept', { language: 'java' })).text, 'changed in the fork')
  assert.equal((await fork.runCode('kept', { language: 'r' })).results[0]?.text, '[1] 41')
  assert.equal((await resumed.runCode('kept', { language: 'java' })).text, 'java kept')
})

test('top-level await in JavaScript and TypeScript cells', async () => {
  const js = await sbx.runCode('const aw = await new Promise((r) => setTimeout(() => r(20), 10))\naw * 2 + 2', { language: 'js' })
  assert.equal(js.text, '42')
  assert.equal((await sbx.runCode('aw + 1', { language: 'js' })).text, '21')
  const ts = await sbx.runCode('const tw: number = await Promise.resolve(20)\ntw + 1', { language: 'ts' })
  assert.equal(ts.text, '21')
  const err = await sbx.runCode('await Promise.reject(new RangeError("no"))', { language: 'js' })
  assert.equal(err.error?.name, 'RangeError')
})
