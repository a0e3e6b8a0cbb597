// Parity with the current npm `e2b` client (issue 13): what an unmodified
// client does and must see answered as E2B answers it — isRunning() of a
// paused sandbox, listing order / filters / pagination, metrics ranges,
// the sandbox's logs, and the filesystem-only pause.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { waitFor } from './helpers.mjs'

const created = new Set()
after(async () => {
  for (const id of created) await Sandbox.kill(id).catch(() => {})
})

async function make(opts = {}) {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000, ...opts })
  created.add(sbx.sandboxId)
  return sbx
}

async function kill(sbx) {
  await Sandbox.kill(sbx.sandboxId)
  created.delete(sbx.sandboxId)
}

test('isRunning() is false after pause() and true after connect()', { timeout: 120_000 }, async () => {
  const sbx = await make()
  assert.equal(await sbx.isRunning(), true)
  assert.equal(await sbx.pause(), true)
  assert.equal(await sbx.isRunning(), false)
  // E2B's proxy body for a paused sandbox, as a 502.
  const res = await fetch(`${process.env.E2B_SANDBOX_URL}/health`, {
    headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' },
  })
  assert.equal(res.status, 502)
  assert.deepEqual(await res.json(), {
    sandboxId: sbx.sandboxId, message: 'The sandbox is paused', code: 502, canAutoResume: false,
  })
  await sbx.connect()
  assert.equal(await sbx.isRunning(), true)
  await kill(sbx)
})
