// Lifecycle parity with the unmodified npm clients (issue 13 items 3 and 7):
// a fork (`e2b`) and a clone (`novita-sandbox`) of a filesystem-only paused
// sandbox boot from its files, and the sandbox's log records the snapshot,
// clone, fork, rollback and expiry (timed-out) events with their fields.
// Run by test/e2e/e2e_test.go (TestE2BClient).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { Sandbox as NSandbox } from 'novita-sandbox'
import { waitFor, api, tracked } from './helpers.mjs'

const { created, make, kill } = tracked()

const bootId = async (sbx) => (await sbx.files.read('/proc/sys/kernel/random/boot_id')).trim()
const sleeping = async (sbx) => (await sbx.commands.run('pgrep -x sleep || true')).stdout.trim() !== ''

// logs returns the sandbox's v2 log entries.
async function logs(id, query = {}) {
  const res = await api('GET', `/v2/sandboxes/${id}/logs`, { query })
  assert.equal(res.status, 200, JSON.stringify(res.error))
  return res.data.logs
}

// logged waits until the sandbox's log has an entry with message (and the
// given fields) and returns it.
async function logged(id, message, fields = {}) {
  return waitFor(`"${message}" ${JSON.stringify(fields)} in the log of ${id}`, async () => {
    const found = (await logs(id, { search: message })).filter((l) => l.message === message)
    return found.find((l) => Object.entries(fields).every(([k, v]) => l.fields[k] === v))
  }, 10_000, 200)
}

test('fork and clone of a filesystem-only paused sandbox boot from its files; the source stays paused', { timeout: 240_000 }, async () => {
  const sbx = await make()
  const boot = await bootId(sbx)
  await sbx.files.write('/home/user/fs-fork.txt', 'files of a files-only pause')
  await sbx.commands.run('sleep 1000', { background: true })
  // Answered once its login shell started, before it exec'd sleep.
  await waitFor('the background sleep', () => sleeping(sbx))
  assert.equal(await sbx.pause({ keepMemory: false }), true)
  await logged(sbx.sandboxId, 'sandbox paused', { memory: 'false' })

  const forks = await sbx.fork({ count: 2 })
  assert.equal(forks.length, 2)
  for (const f of forks) {
    assert.ok(!(f instanceof Error), `fork failed: ${f}`)
    created.add(f.sandboxId)
  }
  const cloned = await NSandbox.clone(sbx.sandboxId, { count: 1 })
  assert.equal(cloned.sandboxes.length, 1)
  const clone = cloned.sandboxes[0]
  created.add(clone.sandboxId)

  for (const [what, c] of [['fork 1', forks[0]], ['fork 2', forks[1]], ['clone', clone]]) {
    assert.equal(await c.files.read('/home/user/fs-fork.txt'), 'files of a files-only pause', `${what}: files kept`)
    assert.notEqual(await bootId(c), boot, `${what}: a new boot`)
    assert.equal(await sleeping(c), false, `${what}: processes gone`)
    await c.files.write('/home/user/own.txt', what)
  }
  assert.notEqual(await bootId(forks[0]), await bootId(forks[1]), 'each fork boots on its own')
  assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'paused', 'the source stays paused')

  await sbx.connect()
  assert.equal(await sbx.files.read('/home/user/fs-fork.txt'), 'files of a files-only pause')
  assert.equal(await sbx.files.exists('/home/user/own.txt'), false, 'the copies wrote only to themselves')
  for (const c of [...forks, clone]) await kill(c.sandboxId)
  await kill(sbx.sandboxId)
})

test('logs record snapshot, fork, clone and rollback with their fields', { timeout: 180_000 }, async () => {
  const sbx = await make()
  const id = sbx.sandboxId
  await sbx.files.write('/home/user/v.txt', 'v1')
  const snap = await sbx.createSnapshot()
  await logged(id, 'snapshot taken', { snapshot: snap.snapshotId })

  const [fork] = await sbx.fork({ count: 1 })
  assert.ok(!(fork instanceof Error), `fork failed: ${fork}`)
  created.add(fork.sandboxId)
  const forkSnap = (await logged(fork.sandboxId, 'sandbox created as a clone', { source: id })).fields.snapshot
  await logged(id, 'sandbox cloned', { copies: '1', failed: '0', snapshot: forkSnap })

  const cloned = await NSandbox.clone(id, { count: 2 })
  for (const c of cloned.sandboxes) created.add(c.sandboxId)
  await logged(id, 'sandbox cloned', { copies: '2', snapshot: cloned.snapshotTemplateId })
  for (const c of cloned.sandboxes) await logged(c.sandboxId, 'sandbox created as a clone', { source: id, snapshot: cloned.snapshotTemplateId })

  await sbx.files.write('/home/user/v.txt', 'v2')
  const rb = await api('POST', `/sandboxes/${id}/rollback`, { body: { snapshotID: snap.snapshotId } })
  assert.equal(rb.status, 200, JSON.stringify(rb.error))
  assert.equal(await sbx.files.read('/home/user/v.txt'), 'v1')
  await logged(id, 'sandbox rolled back', { snapshot: snap.snapshotId })

  const msgs = (await logs(id)).map((l) => l.message)
  const order = ['sandbox created', 'snapshot taken', 'sandbox cloned', 'sandbox rolled back'].map((m) => msgs.indexOf(m))
  assert.deepEqual(order, [...order].sort((a, b) => a - b), `lifecycle events in order: ${msgs}`)
  assert.ok(order[0] >= 0, `created in ${msgs}`)

  for (const s of [fork, ...cloned.sandboxes]) await kill(s.sandboxId)
  await kill(id)
  await Sandbox.deleteSnapshot(snap.snapshotId)
})

test('logs record a timeout: expired with its action, then the pause it made', { timeout: 120_000 }, async () => {
  const sbx = await make({ timeoutMs: 3_000, lifecycle: { onTimeout: 'pause' } })
  const id = sbx.sandboxId
  await waitFor('the timeout pause', async () => (await Sandbox.getInfo(id)).state === 'paused', 20_000, 200)
  const expired = await logged(id, 'sandbox expired', { action: 'pause' })
  const paused = await logged(id, 'sandbox paused')
  assert.ok(Date.parse(expired.timestamp) <= Date.parse(paused.timestamp), 'the expiry comes before its pause')
  assert.equal(expired.level, 'info')

  // A sandbox killed by its timeout goes as one killed on request: GET
  // answers 404 and its log goes with it (README: forkbox keeps no log of
  // a killed sandbox, only of one that died on its own).
  const doomed = await make({ timeoutMs: 2_000 })
  await waitFor('the timeout kill', () => Sandbox.getInfo(doomed.sandboxId).then(() => false, () => true), 20_000, 200)
  created.delete(doomed.sandboxId)
  assert.equal((await api('GET', `/v2/sandboxes/${doomed.sandboxId}/logs`)).status, 404)
  await kill(id)
})
