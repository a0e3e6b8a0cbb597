// bench_first.mjs: time an npm e2b client's create + first commands.run and
// resume + first commands.run (medians of N). Benchmark, not a test: run it
// with E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY pointed at a daemon:
//   cd test/e2e/js && N=9 node bench_first.mjs
import { Sandbox } from 'e2b';
const t = () => performance.now();
const med = (xs) => { const s = [...xs].sort((p, q) => p - q); return +s[Math.floor(s.length / 2)].toFixed(1); };
const N = Number(process.env.N || 9);
const createFirst = [], createOnly = [], firstOnly = [], resumeEcho = [], resumeOnly = [], resumeEchoOnly = [];
for (let i = 0; i < N; i++) {
  await new Promise(r => setTimeout(r, 1500)); // let the warm pool refill
  let a = t(); const sb = await Sandbox.create('base'); const c = t() - a;
  let b = t(); const r = await sb.commands.run('echo hi'); const f = t() - b;
  if (r.stdout !== 'hi\n') throw new Error('bad ' + r.stdout);
  createFirst.push(t() - a); createOnly.push(c); firstOnly.push(f);
  await new Promise(r => setTimeout(r, 1500)); // the pool refilled before the pause
  await sb.betaPause();
  a = t(); const sb2 = await Sandbox.connect(sb.sandboxId); const ro = t() - a;
  b = t(); const r2 = await sb2.commands.run('echo $((6*7))'); const re = t() - b;
  if (r2.stdout !== '42\n') throw new Error('bad ' + r2.stdout);
  resumeEcho.push(t() - a); resumeOnly.push(ro); resumeEchoOnly.push(re);
  await sb2.kill();
}
console.log(JSON.stringify({ n: N, createFirst: med(createFirst), create: med(createOnly), first: med(firstOnly), resumeFirst: med(resumeEcho), resume: med(resumeOnly), firstAfterResume: med(resumeEchoOnly) }));
