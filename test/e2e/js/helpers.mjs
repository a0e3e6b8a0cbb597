// Helpers shared by the end-to-end test files (not a test file itself:
// the Go runner runs *.test.mjs only).
import { after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError } from 'e2b'

export const sleep = (n) => new Promise((r) => setTimeout(r, n))

// waitFor polls fn until it returns something truthy, failing the test
// after timeoutMs.
export async function waitFor(what, fn, timeoutMs = 10_000, everyMs = 100) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(everyMs)
  }
}

// run returns the result of a command whatever its exit code.
export async function run(sbx, cmd, opts = {}) {
  try {
    return await sbx.commands.run(cmd, opts)
  } catch (e) {
    if (e instanceof CommandExitError) return { exitCode: e.exitCode, stdout: e.stdout, stderr: e.stderr }
    throw e
  }
}

// api calls the control API through the npm `e2b` client's own API client
// (the one its Sandbox class uses: API key, base URL, comma-joined arrays),
// for the routes the SDK has no method for (logs, batch metrics, rollback).
// It resolves to { status, data, error } whatever the status.
export async function api(method, path, { query, body } = {}) {
  const { ApiClient, ConnectionConfig } = await import('e2b')
  const client = new ApiClient(new ConnectionConfig()).api
  const res = await client[method](path, { params: { query, path: {} }, ...(body && { body }) })
  return { status: res.response.status, data: res.data, error: res.error }
}

// tracked keeps a test file's sandboxes: make creates one (2 min timeout)
// and remembers it, kill (a sandbox or an id) kills and forgets it, add
// remembers one made otherwise (a fork, a clone), and those left are killed
// after the file's tests. Call it once, at the file's top level.
export function tracked() {
  const created = new Set()
  after(async () => {
    for (const id of created) await Sandbox.kill(id).catch(() => {})
  })
  return {
    created,
    add: (sbx) => created.add(sbx.sandboxId),
    async make(opts = {}, template = 'base') {
      const sbx = await Sandbox.create(template, { timeoutMs: 120_000, ...opts })
      created.add(sbx.sandboxId)
      return sbx
    },
    async kill(sbx) {
      const id = typeof sbx === 'string' ? sbx : sbx.sandboxId
      await Sandbox.kill(id)
      created.delete(id)
    },
  }
}

// deleteTemplate deletes a user template as E2B's CLI does (DELETE
// /templates/{id}; the SDK has no call of its own) and expects 204.
export async function deleteTemplate(name) {
  const res = await fetch(`${process.env.E2B_API_URL}/templates/${encodeURIComponent(name)}`, {
    method: 'DELETE',
    headers: { 'X-API-Key': process.env.E2B_API_KEY },
  })
  assert.equal(res.status, 204, `delete ${name}: ${res.status} ${await res.text()}`)
}

// chartOf runs a matplotlib cell (plt.show() appended) in sbx and returns
// the chart of the one result with a png, failing the test without one.
export async function chartOf(sbx, code) {
  const ex = await sbx.runCode(code + '\nplt.show()')
  assert.equal(ex.error, undefined, code)
  const r = ex.results.find((x) => x.png)
  assert.ok(r?.chart, `a chart for ${code}`)
  return r.chart
}
