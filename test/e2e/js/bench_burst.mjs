// bench_burst.mjs: issue 22's burst through an npm e2b client: N sandboxes
// (100) created, one commands.run('echo hi') in each, 3 s idle, then
// commands.run('echo hi') in all of them at the same moment; prints each
// call's latency from the common start (p50/p90/p99/all). Benchmark, not a
// test: run it with E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY pointed at
// a daemon:
//   cd test/e2e/js && N=100 node bench_burst.mjs
import { Sandbox } from 'e2b'
const N = +(process.env.N ?? 100)
const sbs = []
for (let i = 0; i < N; i++) {
  const s = await Sandbox.create({ timeoutMs: 600_000 })
  await s.commands.run('echo hi')
  sbs.push(s)
}
await new Promise(r => setTimeout(r, 3000))
const t0 = performance.now()
const lat = await Promise.all(sbs.map(async s => {
  const r = await s.commands.run('echo hi')
  if (r.stdout !== 'hi\n') throw new Error('bad output ' + r.stdout)
  return performance.now() - t0
}))
lat.sort((a, b) => a - b)
const q = f => lat[Math.min(N - 1, Math.floor(f * N))].toFixed(0)
console.log(`burst N=${N} p50 ${q(0.5)} p90 ${q(0.9)} p99 ${q(0.99)} all ${lat[N - 1].toFixed(0)} ms`)
await Promise.all(sbs.map(s => s.kill()))
