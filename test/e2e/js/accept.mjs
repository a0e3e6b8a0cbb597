// Acceptance walk of issue 3 (pause/resume, snapshots, fork/clone,
// rollback, TTL, lineage) against a running `make serve`, with the
// unmodified npm clients. Prints one line per check with its timing and
// stops at the first failure. Not part of `make test` (the *.test.mjs files
// cover the same ground there); it is how docs/benchmarks.md's acceptance
// numbers were taken:
//
//   export E2B_API_URL=http://127.0.0.1:3000 E2B_SANDBOX_URL=$E2B_API_URL E2B_API_KEY=…
//   export NOVITA_API_URL=$E2B_API_URL NOVITA_SANDBOX_URL=$E2B_API_URL NOVITA_API_KEY=$E2B_API_KEY
//   cd test/e2e/js && node accept.mjs
import { Sandbox } from 'e2b'
import { Sandbox as NSandbox } from 'novita-sandbox'

const API = process.env.E2B_API_URL, KEY = process.env.E2B_API_KEY
const H = { 'X-API-Key': KEY, 'Content-Type': 'application/json' }
const sleep = (n) => new Promise((r) => setTimeout(r, n))
const ok = (cond, what) => { if (!cond) throw new Error('FAILED: ' + what); console.log('ok  ', what) }
const ms = (t) => Math.round(performance.now() - t)
const api = async (method, path, body) => {
  const r = await fetch(API + path, { method, headers: H, body: body && JSON.stringify(body) })
  const text = await r.text()
  let json = null; try { json = JSON.parse(text) } catch {}
  return { status: r.status, json, text, headers: r.headers }
}
const NAME = 'accept-' + Date.now()
const made = []
const make = async (o = {}) => { const s = await Sandbox.create('base', { timeoutMs: 300_000, ...o }); made.push(s.sandboxId); return s }

async function counter(sbx) {
  await sbx.files.write('/tmp/count.py', 'import time, uuid\ntoken = uuid.uuid4().hex\ni = 0\nwhile True:\n    i += 1\n    open("/tmp/s.tmp","w").write("%s:%d" % (token, i))\n    __import__("os").replace("/tmp/s.tmp", "/tmp/state")\n    time.sleep(0.05)\n')
  await sbx.commands.run('python3 /tmp/count.py', { background: true })
  for (let i = 0; i < 100; i++) { try { const s = await sbx.files.read('/tmp/state'); if (s.includes(':')) return } catch {} await sleep(50) }
  throw new Error('counter did not start')
}
const state = async (sbx) => { const [t, n] = (await sbx.files.read('/tmp/state')).trim().split(':'); return [t, Number(n)] }

try {
  // 1. pause / resume with memory
  let sbx = await make()
  await counter(sbx)
  const [tok, n] = await state(sbx)
  let t = performance.now()
  ok(await sbx.pause() === true, `1 pause returns (${ms(t)} ms)`)
  ok((await Sandbox.getInfo(sbx.sandboxId)).state === 'paused', '1 info says paused at once')
  let err = null
  try { await sbx.commands.run('true') } catch (e) { err = e }
  ok(err !== null, `1 commands on a paused sandbox fail (${err && err.constructor.name}: ${String(err && err.message).slice(0, 60)})`)
  const dp = await api('POST', `/sandboxes/${sbx.sandboxId}/pause`)
  ok(dp.status === 409, `1 second pause: HTTP ${dp.status} ${dp.text.slice(0, 60)}`)
  const paused = []
  const pager = Sandbox.list({ query: { state: ['paused'] }, limit: 1 })
  while (pager.hasNext) paused.push(...(await pager.nextItems()))
  ok(paused.some((s) => s.sandboxId === sbx.sandboxId), `1 Sandbox.list paused (paged, limit 1): ${paused.length} paused`)
  t = performance.now()
  sbx = await Sandbox.connect(sbx.sandboxId)
  const connectMs = ms(t)
  await sleep(300)
  const [tok2, n2] = await state(sbx)
  ok(tok2 === tok && n2 > n, `1 connect resumes in ${connectMs} ms; variable intact, counter ${n} → ${n2}`)
  const info = await Sandbox.getInfo(sbx.sandboxId)
  const left = (new Date(info.endAt) - Date.now()) / 1000
  ok(left > 250 && left <= 300, `1 resume resets the timeout to the default (${Math.round(left)} s left)`)
  let lost = 0
  t = performance.now()
  for (let i = 0; i < 20; i++) {
    await sbx.files.write(`/home/user/cycle-${i}.txt`, String(i))
    await sbx.pause()
    sbx = await Sandbox.connect(sbx.sandboxId)
    for (let j = 0; j <= i; j++) if ((await sbx.files.read(`/home/user/cycle-${j}.txt`)) !== String(j)) lost++
  }
  const [tok3] = await state(sbx)
  ok(lost === 0 && tok3 === tok, `1 20 pause/resume cycles with files: ${lost} lost, token kept (${Math.round(ms(t) / 20)} ms per cycle)`)
  await sbx.pause()
  ok((await api('DELETE', `/sandboxes/${sbx.sandboxId}`)).status === 204, '1 DELETE kills a paused sandbox')
  ok((await api('GET', `/sandboxes/${sbx.sandboxId}`)).status === 404, '1 ... and it is gone (404)')

  // 2. snapshots
  const src = await make()
  await src.files.write('/home/user/v.txt', 'v1')
  t = performance.now()
  const snap = await api('POST', `/sandboxes/${src.sandboxId}/snapshots`, { name: NAME })
  ok(snap.status === 201 || snap.status === 200, `2 named snapshot ${snap.json?.snapshotID ?? snap.text} (${ms(t)} ms), source keeps running: ${await src.isRunning()}`)
  const snapID = snap.json.snapshotID
  const sdkSnap = await src.createSnapshot()
  const byName = await api('GET', `/snapshots?name=${NAME}`)
  ok(byName.json.some((s) => s.snapshotID === snapID), `2 list filter name: ${byName.json.length} match`)
  let pages = 0, seen = []
  let next = ''
  do {
    const r = await api('GET', `/snapshots?sandboxID=${src.sandboxId}&limit=1${next ? '&nextToken=' + next : ''}`)
    seen.push(...r.json.map((s) => s.snapshotID)); pages++
    next = r.headers.get('x-next-token') || ''
  } while (next)
  ok(seen.includes(snapID) && seen.includes(sdkSnap.snapshotId) && pages >= 2, `2 list filter sandboxID, paged by 1: ${seen.length} in ${pages} pages`)
  await src.kill()
  const fromSnap = await Sandbox.create(snapID, { timeoutMs: 60_000 }); made.push(fromSnap.sandboxId)
  ok(await fromSnap.files.read('/home/user/v.txt') === 'v1', '2 snapshot outlives its sandbox; POST /sandboxes from it has its files')
  const del = await api('DELETE', `/templates/${sdkSnap.snapshotId}`)
  ok(del.status === 204, `2 DELETE /templates/{id}: ${del.status}`)
  const ttlSnap = await api('POST', `/sandboxes/${fromSnap.sandboxId}/snapshots`, { ttl: 2 })
  const stillThere = (await api('GET', `/snapshots?sandboxID=${fromSnap.sandboxId}`)).json.some((s) => s.snapshotID === ttlSnap.json.snapshotID)
  await fromSnap.kill() // a snapshot is in use while its source lives
  t = performance.now()
  let collected = false
  while (!collected && ms(t) < 20000) {
    await sleep(250)
    collected = !(await api('GET', `/snapshots?sandboxID=${fromSnap.sandboxId}`)).json.some((s) => s.snapshotID === ttlSnap.json.snapshotID)
  }
  ok(collected, `2 snapshot with ttl 2 s: listed while its source lives (${stillThere}), collected ${ms(t)} ms after the source was killed (collector: every 10 s)`)

  // 3. clone / fork
  const base = await make({ metadata: { who: 'accept' } })
  await counter(base)
  await base.files.write('/home/user/past.txt', 'before')
  t = performance.now()
  const forks = await base.fork({ count: 3 })
  const forkMs = ms(t)
  forks.forEach((f) => made.push(f.sandboxId))
  for (const f of forks) await f.files.write('/home/user/own.txt', f.sandboxId)
  let iso = true
  for (const f of forks) iso &&= (await f.files.read('/home/user/own.txt')) === f.sandboxId && (await f.files.read('/home/user/past.txt')) === 'before'
  iso &&= !(await base.files.exists('/home/user/own.txt'))
  const [bt] = await state(base); const [ft] = await state(forks[0])
  ok(forks.length === 3 && iso, `3 e2b fork count 3 in ${forkMs} ms: inherit the past, isolated from each other and the source`)
  ok(bt === ft, '3 a fork carries the source\'s memory (same token in its counter)')
  const rf = await api('POST', `/sandboxes/${base.sandboxId}/fork`, { count: 101 })
  ok(rf.status === 400, `3 fork count 101: HTTP ${rf.status}`)
  t = performance.now()
  const nc = await NSandbox.clone(base.sandboxId, { count: 2 })
  ok(nc.count === 2 && nc.snapshotTemplateId && nc.sandboxes.length === 2, `3 novita-sandbox Sandbox.clone count 2 in ${ms(t)} ms, snapshotTemplateId ${nc.snapshotTemplateId}`)
  nc.sandboxes.forEach((s) => made.push(s.sandboxId))
  ok((await nc.sandboxes[0].commands.run('cat /home/user/past.txt')).stdout === 'before', '3 novita clone has the file')
  const delTpl = await api('DELETE', `/templates/${nc.snapshotTemplateId}`)
  ok(delTpl.status === 409 || delTpl.status === 400, `3 clone snapshot not deletable while in use: HTTP ${delTpl.status}`)
  const strict = await api('POST', `/sandboxes/${base.sandboxId}/clone`, { count: 2, strict: true, timeout: 60 })
  ok(strict.status === 201 || strict.status === 200, `3 POST /clone strict timeout 60: ${strict.json?.count} sandboxes`)
  for (const s of strict.json.sandboxes) { made.push(s.sandboxID); const i = await Sandbox.getInfo(s.sandboxID); ok(Math.abs((new Date(i.endAt) - Date.now()) / 1000 - 60) < 5, `3 clone timeout 60 honoured (${s.sandboxID})`) }
  await base.pause()
  const pc = await api('POST', `/sandboxes/${base.sandboxId}/clone`, { count: 1 })
  made.push(pc.json.sandboxes[0].sandboxID)
  ok((await Sandbox.getInfo(base.sandboxId)).state === 'paused', `3 clone of a paused source: clone runs, source stays paused`)
  const ap = await make({ lifecycle: { onTimeout: 'pause', autoResume: true } })
  const apc = await api('POST', `/sandboxes/${ap.sandboxId}/clone`, { count: 1 })
  const apcInfo = await api('GET', `/sandboxes/${apc.json.sandboxes[0].sandboxID}`)
  made.push(apc.json.sandboxes[0].sandboxID)
  ok(apcInfo.json.lifecycle?.autoResume === true && apcInfo.json.lifecycle?.onTimeout === 'kill', `3 clone of an auto-pause/auto-resume source inherits auto-resume, not auto-pause: ${JSON.stringify(apcInfo.json.lifecycle)}`)

  // 4. rollback
  const rb = await make()
  await rb.files.write('/home/user/v.txt', 'v1')
  const rs = await api('POST', `/sandboxes/${rb.sandboxId}/snapshots`, {})
  await rb.files.write('/home/user/v.txt', 'v2')
  t = performance.now()
  const r1 = await api('POST', `/sandboxes/${rb.sandboxId}/rollback`, { snapshotID: rs.json.snapshotID })
  const rbMs = ms(t)
  ok(r1.status === 200 && await rb.files.read('/home/user/v.txt') === 'v1', `4 rollback in ${rbMs} ms, same id, same SDK object reads v1`)
  await rb.files.write('/home/user/v.txt', 'v3')
  const s3 = await rb.createSnapshot()
  const v3 = await Sandbox.create(s3.snapshotId, { timeoutMs: 60_000 }); made.push(v3.sandboxId)
  ok(await v3.files.read('/home/user/v.txt') === 'v3', '4 timeline v1 → snap → v2 → rollback → v1 → v3 → snap → new sandbox reads v3')
  const foreign = await api('POST', `/sandboxes/${rb.sandboxId}/rollback`, { snapshotID: snapID })
  ok(foreign.status === 400, `4 rollback to another lineage's snapshot: HTTP ${foreign.status} ${foreign.text.slice(0, 70)}`)

  // 5. TTL: delete, auto-pause, auto-resume
  const short = await make({ timeoutMs: 3000 })
  const sp = await make({ timeoutMs: 3000, lifecycle: { onTimeout: 'pause', autoResume: true } })
  await sp.commands.run('mkdir -p /home/user/www && echo -n awake > /home/user/www/a.txt && cd /home/user/www && nohup python3 -m http.server 8000 >/dev/null 2>&1 &')
  const endKill = new Date((await Sandbox.getInfo(short.sandboxId)).endAt).getTime()
  const endPause = new Date((await Sandbox.getInfo(sp.sandboxId)).endAt).getTime()
  const deadline = Math.max(endKill, endPause)
  let deleted = 0, pausedAt = 0
  while (Date.now() < deadline + 5000 && (!deleted || !pausedAt)) {
    if (!deleted && (await api('GET', `/sandboxes/${short.sandboxId}`)).status === 404) deleted = Date.now()
    if (!pausedAt && (await api('GET', `/sandboxes/${sp.sandboxId}`)).json?.state === 'paused') pausedAt = Date.now()
    await sleep(100)
  }
  ok(deleted && deleted >= endKill && deleted - endKill < 2000, `5 TTL kill ${deleted - endKill} ms after its endAt (polled every 100 ms)`)
  ok(pausedAt && pausedAt >= endPause && pausedAt - endPause < 2000, `5 TTL auto-pause ${pausedAt - endPause} ms after its endAt`)
  t = performance.now()
  const res = await fetch(`${API}/a.txt`, { headers: { 'E2b-Sandbox-Id': sp.sandboxId, 'E2b-Sandbox-Port': '8000' } })
  ok(res.status === 200 && (await res.text()) === 'awake', `5 auto-resume: traffic to a paused sandbox answered in ${ms(t)} ms`)

  // 6. lineage
  const lin = await api('GET', `/sandboxes/${forks[0].sandboxId}/lineage`)
  ok(lin.status === 200, `6 lineage of a fork: ${lin.text.slice(0, 200)}…`)
} finally {
  for (const id of made) await Sandbox.kill(id).catch(() => {})
}
