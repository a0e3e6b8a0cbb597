// The code interpreter's kernels under stress, with the unmodified
// @e2b/code-interpreter client: memory blow-ups, kernels that exit, cells
// interrupted by the client's timeout in every language, output floods,
// unknown contexts, TypeScript's and Java's environment and cwd, and the
// rarer chart scales.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'
import { chartOf } from './helpers.mjs'

let sbx
const extra = []
before(async () => {
  sbx = await Sandbox.create({ timeoutMs: 600_000 })
})
after(async () => {
  for (const s of [sbx, ...extra]) await s?.kill().catch(() => {})
})

// value is what a cell shows: its main result, else (IRkernel shows values
// as display data) its results, else its stdout.
const value = (ex) => ex.text ?? (ex.results.length ? ex.results.map((r) => r.text).join('|') : ex.logs.stdout.join(''))

test('memory blow-up: allocations fail in Python, JavaScript and R and the kernels keep their state; a giant allocation or a full V8 heap ends only their kernel', async () => {
  // A sandbox of its own: its memory is what the cells fill. The agent's
  // out-of-memory guard makes the growing process's allocations fail when
  // memory gets short and kills the largest one only when it runs out.
  const s = await Sandbox.create({ timeoutMs: 300_000 })
  extra.push(s)
  await s.runCode('keep = "kept"')
  const grow = await s.runCode('hog = []\nwhile True:\n    hog.append(bytearray(10**6))', { timeoutMs: 120_000 })
  assert.equal(grow.error?.name, 'MemoryError', JSON.stringify(grow.error))
  assert.equal((await s.runCode('n = len(hog)\ndel hog\n(keep, n > 100)')).text, "('kept', True)")

  // gVisor maps a terabyte at once; filling it runs memory out.
  const giant = await s.runCode("'a' * 10**12", { timeoutMs: 120_000 })
  assert.equal(giant.error?.name, 'DeadKernelError', JSON.stringify(giant.error))
  assert.match(giant.error.value, /ran out of memory/)
  const fresh = await s.runCode('"keep" in dir()')
  assert.equal(fresh.text, 'False')
  assert.equal(fresh.executionCount, 1)

  await s.runCode('var keep = 1', { language: 'js' })
  const buffers = await s.runCode('const a = []\nwhile (true) a.push(Buffer.alloc(1e7, 1))', { language: 'js', timeoutMs: 120_000 })
  assert.equal(buffers.error?.name, 'RangeError', JSON.stringify(buffers.error))
  assert.equal((await s.runCode('a.length = 0\ntypeof keep', { language: 'js' })).text, 'number')
  const heap = await s.runCode('const b = []\nwhile (true) b.push(new Array(1e6).fill(1.5))', { language: 'js', timeoutMs: 120_000 })
  assert.equal(heap.error?.name, 'DeadKernelError', JSON.stringify(heap.error))
  assert.match(heap.error.value, /out of memory/)
  assert.equal((await s.runCode('typeof keep', { language: 'js' })).text, 'undefined')

  await s.runCode('keep <- 1', { language: 'r' })
  const r = await s.runCode('l <- list(); i <- 0\nwhile (TRUE) { i <- i + 1; l[[i]] <- numeric(1e6) + i }', { language: 'r', timeoutMs: 120_000 })
  assert.match(r.error?.value ?? '', /cannot allocate/, JSON.stringify(r.error))
  assert.equal(value(await s.runCode('rm(l)\nexists("keep")', { language: 'r' })), '[1] TRUE')

  assert.equal((await s.commands.run('echo alive')).stdout, 'alive\n')
  assert.equal((await s.runCode('1 + 1')).text, '2')
})

test('a kernel that exits (JavaScript, R) reports DeadKernelError and the next call gets a fresh one', async () => {
  for (const [language, setup, exit, check, fresh] of [
    ['js', 'var gone = 1', 'process.exit(3)', 'typeof gone', 'undefined'],
    ['ts', 'var gone: number = 1', 'process.exit(3)', 'typeof gone', 'undefined'],
    // IRkernel's quit() only asks the frontend to stop the kernel (a
    // payload E2B's server ignores too); R's primitive exits.
    ['r', 'gone <- 1', '.Internal(quit("no", 3L, FALSE))', 'exists("gone")', '[1] FALSE'],
  ]) {
    const ctx = await sbx.createCodeContext({ language })
    await sbx.runCode(setup, { context: ctx })
    const ex = await sbx.runCode(exit, { context: ctx })
    assert.equal(ex.error?.name, 'DeadKernelError', `${language}: ${JSON.stringify(ex.error)}`)
    assert.equal(value(await sbx.runCode(check, { context: ctx })), fresh, language)
    await sbx.removeCodeContext(ctx)
  }
})

test('a timeout interrupts a cell in every language and the kernel keeps its state', async () => {
  for (const [language, setup, loop, check, want] of [
    ['js', 'var kept = 41', 'while (true) {}', 'kept + 1', '42'],
    ['js', 'var kept = 41', 'await new Promise(() => {})', 'kept + 1', '42'],
    ['ts', 'let kept: number = 41', 'while (true) {}', 'kept + 1', '42'],
    ['r', 'kept <- 41', 'while (TRUE) {}', 'kept + 1', '[1] 42'],
    ['java', 'int kept = 41;', 'while (true) {}', 'kept + 1', '42'],
    ['bash', 'KEPT=42', 'sleep 60', 'echo $KEPT', '42\n'],
  ]) {
    const ctx = await sbx.createCodeContext({ language })
    await sbx.runCode(setup, { context: ctx })
    const t = Date.now()
    await assert.rejects(sbx.runCode(loop, { context: ctx, timeoutMs: 2000 }), /timed out/i, language)
    assert.equal(value(await sbx.runCode(check, { context: ctx })), want, `${language}: ${loop}`)
    assert.ok(Date.now() - t < 20_000, `${language}: the interrupt took ${Date.now() - t} ms`)
    await sbx.removeCodeContext(ctx)
  }
})

test('an unknown context answers 404 (NotFoundError) for execute, restart and remove', async () => {
  const ghost = { id: '00000000-0000-4000-8000-000000000000', language: 'python', cwd: '/home/user' }
  await assert.rejects(sbx.runCode('1', { context: ghost }), (e) => e.name === 'NotFoundError' && /not found/.test(e.message))
  await assert.rejects(sbx.restartCodeContext(ghost), (e) => e.name === 'NotFoundError')
  await assert.rejects(sbx.removeCodeContext(ghost), (e) => e.name === 'NotFoundError')
})

test('an output flood is cut at 32 MiB with a notice; the main result and the end of execution still arrive', async () => {
  const ctx = await sbx.createCodeContext()
  const ex = await sbx.runCode('import sys\nfor _ in range(40):\n    sys.stdout.write("x" * 2**20)\n"end"', { context: ctx, timeoutMs: 120_000 })
  const out = ex.logs.stdout.join('')
  assert.ok(out.length <= 32 * 2 ** 20 && out.length > 30 * 2 ** 20, `stdout ${out.length} bytes`)
  assert.match(ex.logs.stderr.join(''), /output truncated/)
  assert.equal(ex.text, 'end')
  assert.equal((await sbx.runCode('1 + 1', { context: ctx })).text, '2')
  await sbx.removeCodeContext(ctx)
})

test('TypeScript: envs per execution and a context cwd; Java: a context cwd', async () => {
  const ts = await sbx.createCodeContext({ language: 'ts', cwd: '/tmp' })
  assert.equal((await sbx.runCode('const here: string = process.cwd()\nhere', { context: ts })).text, '/tmp')
  const env = await sbx.runCode('const v: string | undefined = process.env.FB_TS\nv', { context: ts, envs: { FB_TS: 'yes' } })
  assert.equal(env.text, 'yes')
  assert.equal((await sbx.runCode('String(process.env.FB_TS)', { context: ts })).text, 'undefined')
  await sbx.removeCodeContext(ts)
  const java = await sbx.createCodeContext({ language: 'java', cwd: '/tmp' })
  assert.equal((await sbx.runCode('new java.io.File("").getAbsolutePath()', { context: java })).text, '/tmp')
  assert.equal((await sbx.runCode('new java.io.File("x").getAbsolutePath()', { context: java })).text, '/tmp/x')
  await sbx.removeCodeContext(java)
})

test('chart scales symlog, logit, function, functionlog and asinh; mixed plots are an unknown chart', async () => {
  await sbx.runCode('import matplotlib.pyplot as plt\nimport numpy as np')
  const chart = (code) => chartOf(sbx, code)
  for (const [axis, scale, call] of [
    ['y', 'symlog', 'plt.yscale("symlog")'],
    ['y', 'logit', 'plt.yscale("logit")'],
    ['x', 'function', 'plt.xscale("function", functions=(np.sqrt, np.square))'],
    ['x', 'functionlog', 'plt.xscale("functionlog", functions=(np.sqrt, np.square))'],
    ['y', 'asinh', 'plt.yscale("asinh")'],
  ]) {
    const c = await chart(`plt.plot([1, 2, 3], [0.1, 0.5, 0.9], label="s")\n${call}`)
    assert.equal(c.type, 'line', scale)
    assert.equal(c[`${axis}_scale`], scale)
    assert.deepEqual(c.elements[0].points, [[1, 0.1], [2, 0.5], [3, 0.9]], scale)
  }
  const mixed = await chart('plt.plot([1, 2])\nplt.bar([1], [2])\nplt.title("M")')
  assert.equal(mixed.type, 'unknown')
  assert.equal(mixed.title, 'M')
  assert.deepEqual(mixed.elements, [])
})
