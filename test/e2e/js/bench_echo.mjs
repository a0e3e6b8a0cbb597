// bench_echo.mjs: an npm e2b client's commands.run('echo hi') and
// files.getInfo('/') (the same proxy + agent path without a process), N each,
// 100 ms apart, in one new sandbox: p50/p10/p90. Benchmark, not a test: run
// it with E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY pointed at a daemon:
//   cd test/e2e/js && N=40 node bench_echo.mjs
import { Sandbox } from 'e2b'
const s = await Sandbox.create({ timeoutMs: 600_000 })
const N = +(process.env.N ?? 40)
const p = (name, ts) => { ts.sort((a, b) => a - b); return `${name} p50 ${ts[N >> 1].toFixed(2)} p10 ${ts[N / 10 | 0].toFixed(2)} p90 ${ts[N * 0.9 | 0].toFixed(2)}` }
const time = async (f) => {
  const ts = []
  for (let i = 0; i < N + 5; i++) {
    const t = performance.now()
    await f()
    if (i >= 5) ts.push(performance.now() - t)
    await new Promise(r => setTimeout(r, 100))
  }
  return ts
}
const echo = await time(() => s.commands.run('echo hi'))
const stat = await time(() => s.files.getInfo('/'))
console.log(p('echo', echo), '|', p('stat', stat), 'ms')
await s.kill()
