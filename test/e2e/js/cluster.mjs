// A forkbox cluster with the unmodified npm `e2b` SDK, run by test/e2e
// (TestCluster): three nodes (FBX_NODES: id → URL) on one PostgreSQL and
// one S3 bucket; E2B_API_URL and E2B_SANDBOX_URL name node a only. Node c
// is killed with SIGKILL (FBX_NODE_C_PID) in the last test. FBX_IMAGE is a
// busybox image in a loopback registry, for a template build.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, Template } from 'e2b'
import { waitFor } from './helpers.mjs'

const NODES = JSON.parse(process.env.FBX_NODES ?? 'null')
const C_PID = Number(process.env.FBX_NODE_C_PID)
const IMAGE = process.env.FBX_IMAGE
assert.ok(NODES && C_PID && IMAGE, 'FBX_NODES, FBX_NODE_C_PID and FBX_IMAGE must be set (run through `go test ./test/e2e -run TestCluster`)')
const T = { timeout: 300_000 }
const created = new Set()
after(async () => {
  for (const id of created) await Sandbox.kill(id).catch(() => {})
})
const keep = (sbx) => { created.add(sbx.sandboxId); return sbx }

// via makes the SDK talk to one node.
const via = (node) => ({ apiUrl: NODES[node], sandboxUrl: NODES[node] })

// rest calls forkbox's own routes (node registry, clone, a sandbox's
// record with its node) on a node.
async function rest(method, path, { node = 'node-a', body } = {}) {
  const res = await fetch(NODES[node] + path, {
    method,
    headers: { 'X-API-Key': process.env.E2B_API_KEY, 'Content-Type': 'application/json' },
    body: body && JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, data: text ? JSON.parse(text) : null }
}
const record = async (id) => (await rest('GET', `/sandboxes/${id}`)).data
const nodeOf = async (id) => (await record(id)).clientID
const drain = (node, on) => rest('POST', `/nodes/${node}/${on ? 'drain' : 'undrain'}`)

const boxes = []

test('12 sandboxes through one node spread over the three and all run commands', T, async () => {
  for (let i = 0; i < 12; i++) boxes.push(keep(await Sandbox.create('base', { timeoutMs: 600_000 })))
  const where = {}
  for (const s of boxes) {
    const n = await nodeOf(s.sandboxId)
    where[n] = (where[n] ?? 0) + 1
  }
  console.log('sandboxes per node:', where)
  assert.deepEqual(Object.keys(where).sort(), ['node-a', 'node-b', 'node-c'], `placed on ${JSON.stringify(where)}`)
  const out = await Promise.all(boxes.map((s) => s.commands.run('echo $((6*7))')))
  for (const r of out) assert.equal(r.stdout.trim(), '42')
})

test('paused on node a, resumed through node b with its memory', T, async () => {
  const s = await firstOn('node-a')
  await s.files.write('/tmp/kept', 'paused on a')
  await s.commands.run('nohup sleep 771 >/dev/null 2>&1 &')
  assert.equal(await s.pause(), true)
  const again = await Sandbox.connect(s.sandboxId, via('node-b'))
  assert.equal(await again.files.read('/tmp/kept'), 'paused on a')
  assert.equal((await again.commands.run('pgrep -f "sleep 771" >/dev/null && echo alive')).stdout.trim(), 'alive')
})

test('strict clone ×6 spreads over nodes, every copy with the source\'s memory', T, async () => {
  const src = await firstOn('node-a')
  await src.commands.run('echo src > /tmp/src; nohup sleep 772 >/dev/null 2>&1 &')
  const res = await rest('POST', `/sandboxes/${src.sandboxId}/clone`, { node: 'node-b', body: { count: 6, strict: true } })
  assert.equal(res.status, 201, JSON.stringify(res.data))
  assert.equal(res.data.sandboxes.length, 6)
  const where = new Set()
  for (const c of res.data.sandboxes) {
    created.add(c.sandboxID)
    where.add(await nodeOf(c.sandboxID))
    const copy = await Sandbox.connect(c.sandboxID)
    assert.equal((await copy.commands.run('cat /tmp/src; pgrep -f "sleep 772" >/dev/null && echo alive')).stdout, 'src\nalive\n')
  }
  console.log('clone copies on', [...where])
  assert.ok(where.size >= 2, `copies on ${[...where]}`)
})

test('a template build asked of node a runs where placement says (b) and starts sandboxes on the others', T, async () => {
  const name = `fbx-cluster-${Date.now().toString(36)}`
  // A new template's first build goes where placement says: a and c
  // drained, that is b, whichever node is asked.
  await drain('node-a', true)
  await drain('node-c', true)
  try {
    await Template.build(Template().fromImage(IMAGE).runCmd('echo built-on-b > /built', { user: 'root' }), name, via('node-a'))
  } finally {
    await drain('node-a', false)
    await drain('node-c', false)
  }
  await drain('node-b', true)
  try {
    const s = keep(await Sandbox.create(name, { timeoutMs: 120_000 }))
    assert.notEqual(await nodeOf(s.sandboxId), 'node-b')
    assert.equal((await s.commands.run('cat /built')).stdout.trim(), 'built-on-b')
  } finally {
    await drain('node-b', false)
  }
})

test('node c killed -9: its running sandboxes are lost, its paused one resumes elsewhere', T, async () => {
  const [paused, running] = await twoOn('node-c')
  await paused.files.write('/tmp/kept', 'paused on c')
  await paused.commands.run('nohup sleep 773 >/dev/null 2>&1 &')
  assert.equal(await paused.pause(), true)
  // forkbox's pause answers at once; killed before it finished, the
  // sandbox would be lost rather than paused.
  await waitFor('the pause on node c done', async () => !(await record(paused.sandboxId)).operation, 60_000, 100)
  process.kill(C_PID, 'SIGKILL')
  await waitFor('node c dead', async () => (await rest('GET', '/nodes/node-c')).data.state === 'dead', 30_000, 200)
  const lost = await waitFor('node c\'s sandbox recorded lost', async () => {
    const r = await record(running.sandboxId)
    return r.state === 'killed' && r
  }, 30_000, 200)
  assert.equal(lost.killReason, 'node lost')
  const listed = []
  const pager = Sandbox.list({ query: { state: ['running'] }, limit: 100 })
  while (pager.hasNext) listed.push(...(await pager.nextItems()))
  assert.ok(!listed.some((s) => s.sandboxId === running.sandboxId), 'a lost sandbox is listed as running')
  const again = await Sandbox.connect(paused.sandboxId)
  assert.ok(['node-a', 'node-b'].includes(await nodeOf(paused.sandboxId)))
  assert.equal(await again.files.read('/tmp/kept'), 'paused on c')
  assert.equal((await again.commands.run('pgrep -f "sleep 773" >/dev/null && echo alive')).stdout.trim(), 'alive')
})

// firstOn is one of the 12 sandboxes running on node.
async function firstOn(node) {
  for (const s of boxes) if ((await nodeOf(s.sandboxId)) === node && (await record(s.sandboxId)).state === 'running') return s
  assert.fail(`no sandbox runs on ${node}`)
}

// twoOn is two of the 12 sandboxes running on node.
async function twoOn(node) {
  const out = []
  for (const s of boxes) if ((await nodeOf(s.sandboxId)) === node && (await record(s.sandboxId)).state === 'running') out.push(s)
  assert.ok(out.length >= 2, `${out.length} sandboxes run on ${node}, want two`)
  return out.slice(0, 2)
}
