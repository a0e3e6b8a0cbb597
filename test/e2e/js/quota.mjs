// The concurrent-sandbox quota with the unmodified `e2b` client, against a
// daemon started with --max-sandboxes 2 (test/e2e/quota_test.go runs this
// file; it is not a *.test.mjs, so the shared daemon does not run it).
// Past the limit a create, fork, clone (`novita-sandbox`, Novita's route)
// and resume (connect) each fail with the SDK's RateLimitError carrying the
// daemon's message, and leave nothing behind;
// paused sandboxes do not count; a kill frees a slot.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, RateLimitError } from 'e2b'
import { Sandbox as NSandbox, RateLimitError as NRateLimitError } from 'novita-sandbox'

const QUOTA = 'count may not exceed the concurrent-sandbox limit'
const created = new Set()
after(async () => {
  for (const id of created) await Sandbox.kill(id).catch(() => {})
})

async function make() {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 })
  created.add(sbx.sandboxId)
  return sbx
}

async function refused(what, call, errorClass = RateLimitError) {
  await assert.rejects(call, (e) => {
    assert.ok(e instanceof errorClass, `${what}: ${e?.name}: ${e?.message}`)
    assert.match(e.message, new RegExp(QUOTA), `${what}: ${e.message}`)
    return true
  })
}

async function liveIds() {
  const paginator = Sandbox.list({ query: { state: ['running', 'paused'] } })
  const ids = []
  while (paginator.hasNext) for (const s of await paginator.nextItems()) ids.push(s.sandboxId)
  return ids.sort()
}

test('create, fork, clone and resume past --max-sandboxes 2 answer 429 and make nothing', { timeout: 180_000 }, async () => {
  const a = await make()
  const b = await make()
  await refused('third create', () => Sandbox.create('base', { timeoutMs: 60_000 }))
  await refused('fork at the limit', () => a.fork({ count: 1 }))
  await refused('clone at the limit', () => NSandbox.clone(a.sandboxId, { count: 1 }), NRateLimitError)
  assert.deepEqual(await liveIds(), [a.sandboxId, b.sandboxId].sort(), 'a refused call left a sandbox')

  assert.equal(await b.pause(), true)
  const c = await make() // the paused sandbox's slot
  await refused('resume at the limit', () => Sandbox.connect(b.sandboxId, { timeoutMs: 60_000 }))
  assert.equal((await Sandbox.getInfo(b.sandboxId)).state, 'paused', 'a refused resume must leave it paused')
  assert.equal((await a.commands.run('echo still')).stdout.trim(), 'still')

  await c.kill()
  created.delete(c.sandboxId)
  const again = await Sandbox.connect(b.sandboxId, { timeoutMs: 60_000 })
  assert.equal((await again.commands.run('echo resumed')).stdout.trim(), 'resumed')
  await refused('fork ×1 with both slots taken', () => again.fork({ count: 1 }))
  await refused('clone ×2 with one slot free', async () => {
    await a.kill()
    created.delete(a.sandboxId)
    return NSandbox.clone(b.sandboxId, { count: 2 })
  }, NRateLimitError)
  assert.deepEqual(await liveIds(), [b.sandboxId], 'a refused clone left a sandbox')
  const [one] = (await NSandbox.clone(b.sandboxId, { count: 1 })).sandboxes
  assert.equal((await one.commands.run('echo cloned')).stdout.trim(), 'cloned', 'a clone fits the freed slot')
  await one.kill()
})
