// Helpers of the tests that run in the egress test's outside world
// (test/e2e/egress_world_test.go builds it; egress.mjs and
// secrets_egress.mjs use it). Not a test file itself.
import assert from 'node:assert/strict'
import { run } from './helpers.mjs'

const A = process.env.EGRESS_WEB_A
const B = process.env.EGRESS_WEB_B
const CONTROL = process.env.EGRESS_CONTROL

// daemonGet calls the daemon's control API with the client's key (the network
// status route is a forkbox extension the npm client does not know).
export async function daemonGet(path) {
  const res = await fetch(`${process.env.E2B_API_URL}${path}`, { headers: { 'X-API-Key': process.env.E2B_API_KEY } })
  assert.equal(res.status, 200, `${path}: ${res.status}`)
  return path === '/metrics' ? res.text() : res.json()
}

// seenHeader is header `name` as server `server` saw it on `path` ("" if
// that request never arrived); the test's control server keeps them.
export async function seenHeader(server, path, name) {
  const res = await fetch(`${CONTROL}/headers?key=${encodeURIComponent(`${server} ${path}`)}`)
  const h = (await res.json()) ?? {}
  const key = Object.keys(h).find((k) => k.toLowerCase() === name.toLowerCase())
  return key ? h[key][0] : ''
}

let nth = 0
export const recPath = (label) => `/rec/${label.replace(/[^a-z0-9.]+/gi, '-')}-${++nth}`

// hosts points the sandbox's own resolver at the test zone (as root), so
// curl and Node need no --resolve; the proxy resolves through the test's
// DNS server whatever the sandbox believes.
export async function hosts(sbx, extra = {}) {
  const names = ['allowed.egress.test', 'a.wild.egress.test', 'x.y.wild.egress.test', 'b.egress.test']
  const lines = [...names.map((n) => `${n === 'b.egress.test' ? B : A} ${n}`), ...Object.entries(extra).map(([n, ip]) => `${ip} ${n}`)].join('\n')
  const r = await run(sbx, `printf '%s\\n' '${lines}' >> /etc/hosts`, { user: 'root' })
  assert.equal(r.exitCode, 0, r.stderr)
}

// curlCode fetches url with the system trust store (which holds the
// egress CA from create) and returns "<status> <body>", or null.
export async function curlCode(sbx, args) {
  const r = await run(sbx, `curl -sS -m 8 -w ' %{http_code}' ${args}`)
  if (r.exitCode !== 0) {
    console.log(`curl ${args}: exit ${r.exitCode}: ${r.stderr.trim()}`)
    return null
  }
  const i = r.stdout.lastIndexOf(' ')
  return `${r.stdout.slice(i + 1)} ${r.stdout.slice(0, i)}`
}

// neverInside checks the secret is nowhere the sandbox can read: its
// processes' environments and command lines, and the usual writable
// places of its files.
export async function neverInside(sbx, secret, bodies) {
  for (const b of bodies) assert.ok(!String(b).includes(secret), `a response carried the secret: ${b}`)
  // Processes first, by a command that does not hold the secret (its own
  // command line is among those read); then files.
  const procs = await run(sbx, `env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n'`, { user: 'root', timeoutMs: 60_000 })
  const r = await run(sbx, `grep -rsIlF '${secret}' /etc /home /root /tmp /usr/local /var /opt /run /srv; true`, { user: 'root', timeoutMs: 60_000 })
  assert.ok(!procs.stdout.includes(secret), `the secret is in a process of the sandbox: ${procs.stdout.split('\n').filter((l) => l.includes(secret))}`)
  assert.equal(r.stdout.trim(), '', 'files of the sandbox hold the secret (grep -l lists them)')
}
