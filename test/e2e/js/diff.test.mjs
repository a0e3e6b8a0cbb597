// Diff and apply (issue 24) with the unmodified npm `e2b` client: the SDK
// makes, forks, pauses, connects and edits the sandboxes; diff and apply
// have no SDK method, so they are called over REST with fetch, as an agent
// using the client would.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { run, tracked } from './helpers.mjs'

const T = { timeout: 180_000 }
const sandboxes = tracked()

// rest calls the control API with the client's own URL and key.
async function rest(method, path, body) {
  const res = await fetch(process.env.E2B_API_URL + path, {
    method,
    headers: { 'X-API-Key': process.env.E2B_API_KEY, ...(body && { 'Content-Type': 'application/json' }) },
    ...(body && { body: JSON.stringify(body) }),
  })
  const text = await res.text()
  let json = null
  try { json = JSON.parse(text) } catch {}
  return { status: res.status, json, text }
}

// changes lists a diff as sorted "kind path what" lines (all pages).
async function changes(id, query = 'path=/home/user') {
  const out = []
  let cursor = ''
  for (;;) {
    const r = await rest('GET', `/sandboxes/${id}/diff?${query}${cursor && '&cursor=' + encodeURIComponent(cursor)}`)
    assert.equal(r.status, 200, r.text)
    for (const c of r.json.changes) out.push(`${c.kind[0]} ${c.path}${c.what ? ' ' + c.what.join(',') : ''}`)
    if (!r.json.next) return out.sort()
    cursor = r.json.next
  }
}

const sh = async (sbx, cmd) => {
  const r = await run(sbx, cmd, { user: 'root' })
  assert.equal(r.exitCode, 0, `${cmd}: ${r.stderr}`)
  return r.stdout
}

// branch i edits e<i>.txt, adds a text and a binary file, deletes rm<i>.txt,
// makes x<i>.sh executable, links l<i> to its text file and sets metadata
// on m<i>.txt; the winner also edits conf.txt.
async function branch(sbx, i) {
  const h = '/home/user/'
  await sbx.files.write(`${h}e${i}.txt`, `edited by branch ${i}\n`)
  await sbx.files.write(`${h}new${i}.txt`, `added by branch ${i}\n`)
  await sbx.files.write(`${h}new${i}.bin`, new Uint8Array([0, 255, i, 0, 7]).buffer)
  await sh(sbx, `cd ${h} && rm rm${i}.txt && chmod 755 x${i}.sh && ln -s new${i}.txt l${i}`)
  await sbx.files.write(`${h}m${i}.txt`, `base m${i}.txt\n`, { metadata: { branch: String(i) } })
}

const expected = (i) => [
  `m /home/user/e${i}.txt content`, `a /home/user/new${i}.txt`, `a /home/user/new${i}.bin`,
  `d /home/user/rm${i}.txt`, `m /home/user/x${i}.sh mode`, `a /home/user/l${i}`, `m /home/user/m${i}.txt xattrs`,
]

test('fork ×3: each diff lists exactly its branch; the winner applies into the parent', T, async () => {
  const parent = await sandboxes.make()
  for (let i = 0; i < 3; i++) {
    for (const f of [`e${i}.txt`, `rm${i}.txt`, `x${i}.sh`, `m${i}.txt`]) await parent.files.write(`/home/user/${f}`, `base ${f}\n`)
  }
  await parent.files.write('/home/user/conf.txt', 'base\n')
  await parent.files.write('/home/user/keep.txt', 'the parent keeps this\n')
  const forks = await parent.fork({ count: 3 })
  for (const f of forks) {
    assert.ok(!(f instanceof Error), `fork failed: ${f}`)
    sandboxes.add(f)
  }
  for (let i = 0; i < 3; i++) await branch(forks[i], i)
  for (let i = 0; i < 3; i++) assert.deepEqual(await changes(forks[i].sandboxId), expected(i).sort(), `branch ${i}'s diff`)

  const patch = await rest('GET', `/sandboxes/${forks[1].sandboxId}/diff?path=/home/user&format=patch`)
  assert.equal(patch.status, 200)
  assert.match(patch.text, /\+edited by branch 1/)
  assert.match(patch.text, /Binary files \/dev\/null and b\/home\/user\/new1\.bin differ/)

  // The parent edits conf.txt one way, the winner another; the parent adds its own file.
  const winner = forks[1]
  await winner.files.write('/home/user/conf.txt', 'winner\n')
  await parent.files.write('/home/user/conf.txt', 'parent\n')
  await parent.files.write('/home/user/own.txt', 'the parent wrote this after the fork\n')
  const r = await rest('POST', `/sandboxes/${parent.sandboxId}/apply`, { from: winner.sandboxId })
  assert.equal(r.status, 200, r.text)
  console.log(`apply: ${r.json.applied.length} applied, ${r.json.conflicts.length} conflict(s), ${r.json.tookMs} ms`)
  assert.deepEqual(r.json.conflicts.map((c) => c.path), ['/home/user/conf.txt'])
  assert.equal(r.json.applied.length, 7)

  assert.equal(await parent.files.read('/home/user/e1.txt'), 'edited by branch 1\n')
  assert.equal(await parent.files.read('/home/user/new1.txt'), 'added by branch 1\n')
  assert.deepEqual([...new Uint8Array(await parent.files.read('/home/user/new1.bin', { format: 'bytes' }))], [0, 255, 1, 0, 7])
  assert.equal(await parent.files.exists('/home/user/rm1.txt'), false)
  assert.equal((await sh(parent, 'stat -c %a /home/user/x1.sh && readlink /home/user/l1')).trim(), '755\nnew1.txt')
  assert.deepEqual((await parent.files.getInfo('/home/user/m1.txt')).metadata, { branch: '1' })
  // Untouched: the parent's own files, the other branches' work, the conflict.
  assert.equal(await parent.files.read('/home/user/keep.txt'), 'the parent keeps this\n')
  assert.equal(await parent.files.read('/home/user/own.txt'), 'the parent wrote this after the fork\n')
  assert.equal(await parent.files.read('/home/user/conf.txt'), 'parent\n')
  assert.equal(await parent.files.read('/home/user/e0.txt'), 'base e0.txt\n')
  assert.equal(await parent.files.exists('/home/user/new0.txt'), false)
  assert.equal(await parent.files.exists('/home/user/rm0.txt'), true)
})

test('diff a paused sandbox, apply after resume, and from a snapshot taken before a rollback', T, async () => {
  const sbx = await sandboxes.make()
  await sbx.files.write('/home/user/a.txt', 'one\n')
  const r = await sbx.createSnapshot()
  await sbx.files.write('/home/user/a.txt', 'two\n')
  await sbx.files.write('/home/user/later.txt', 'after r\n')
  const s0 = await sbx.createSnapshot()
  const between = await rest('GET', `/snapshots/${s0.snapshotId}/diff?against=${r.snapshotId}&path=/home/user`)
  assert.equal(between.status, 200, between.text)
  assert.deepEqual(between.json.changes.map((c) => c.kind + ' ' + c.path).sort(), ['added /home/user/later.txt', 'modified /home/user/a.txt'])

  assert.equal(await sbx.pause(), true)
  assert.deepEqual(await changes(sbx.sandboxId, `against=${s0.snapshotId}&path=/home/user`), [], 'a paused sandbox diffs from its image')
  const resumed = await Sandbox.connect(sbx.sandboxId)
  const rb = await rest('POST', `/sandboxes/${sbx.sandboxId}/rollback`, { snapshotID: r.snapshotId })
  assert.equal(rb.status, 200, rb.text)
  assert.equal(await resumed.files.read('/home/user/a.txt'), 'one\n')
  const ap = await rest('POST', `/sandboxes/${sbx.sandboxId}/apply`, { from: s0.snapshotId })
  assert.equal(ap.status, 200, ap.text)
  assert.equal(ap.json.base, r.snapshotId, 'the base is the snapshot rolled back to')
  assert.equal(await resumed.files.read('/home/user/a.txt'), 'two\n')
  assert.equal(await resumed.files.read('/home/user/later.txt'), 'after r\n')
})

test('unknown ids are 404, escapes and bad strategies 400', T, async () => {
  const sbx = await sandboxes.make()
  assert.equal((await rest('GET', '/sandboxes/nosuchsandbox0000000/diff')).status, 404)
  assert.equal((await rest('GET', `/sandboxes/${sbx.sandboxId}/diff?against=nosuchsnapshot000000`)).status, 404)
  assert.equal((await rest('GET', `/sandboxes/${sbx.sandboxId}/diff?path=/../etc`)).status, 400)
  assert.equal((await rest('POST', `/sandboxes/${sbx.sandboxId}/apply`, { from: 'nosuchsandbox0000000' })).status, 404)
  assert.equal((await rest('POST', `/sandboxes/${sbx.sandboxId}/apply`, { from: sbx.sandboxId })).status, 400)
  assert.equal((await rest('POST', `/sandboxes/${sbx.sandboxId}/apply`, { from: 'base', paths: ['/../x'] })).status, 400)
})
