// The in-sandbox agent with the unmodified npm `e2b` client: the files API
// acts with the named user's rights (issue 12 item 5), file metadata
// (X-Metadata-* → user.e2b.* xattrs, envd 0.6.2) through write / getInfo /
// list / rename / pause-resume / fork, idempotent remove and envd's
// signed-URL bodies (issue 13 items 4, 5) — also through a filesystem-only
// pause, a snapshot → new sandbox and a rollback —, and what the base template gives
// (issue 13 item 8). Run by test/e2e/e2e_test.go (TestE2BClient).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { Sandbox } from 'e2b'
import { sleep, waitFor, run, api } from './helpers.mjs'

const T = { timeout: 90_000 }
const API_URL = process.env.E2B_API_URL
const SANDBOX_URL = process.env.E2B_SANDBOX_URL || API_URL
assert.ok(API_URL, 'E2B_API_URL must be set (run through `go test ./test/e2e`)')

const created = new Set()
after(async () => {
  for (const id of created) await Sandbox.kill(id).catch(() => {})
})

async function create(opts = {}) {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000, ...opts })
  created.add(sbx.sandboxId)
  return sbx
}

async function kill(sbx) {
  created.delete(sbx.sandboxId)
  await sbx.kill()
}

// rejectsDenied asserts that p fails the way a permission error answers:
// 403 / permission_denied carrying the kernel's "permission denied".
async function rejectsDenied(p, what) {
  await assert.rejects(p, (e) => {
    assert.match(String(e.message), /permission denied/i, `${what}: ${e}`)
    assert.match(String(e.message), /403|permission_denied/, `${what}: ${e}`)
    return true
  }, what)
}

// ---------------------------------------------------------------- user rights

test('rights: user cannot write /etc (not even through a symlink), root can', T, async () => {
  const sbx = await create()
  try {
    const shadowSum = (await sbx.commands.run('sha256sum /etc/shadow', { user: 'root' })).stdout
    await sbx.commands.run('ln -s /etc/shadow /home/user/shadow-link')

    await rejectsDenied(sbx.files.write('/etc/forkbox-e2e', 'x'), 'write /etc as user')
    await rejectsDenied(sbx.files.write('/etc/forkbox-e2e', 'x', { useOctetStream: true }), 'octet write /etc as user')
    await rejectsDenied(sbx.files.write('shadow-link', 'pwned'), 'write /etc/shadow through a symlink as user')
    await rejectsDenied(sbx.files.makeDir('/etc/forkbox-dir'), 'makeDir in /etc as user')
    await rejectsDenied(sbx.files.remove('/etc/hostname'), 'remove /etc/hostname as user')
    await rejectsDenied(sbx.files.rename('/etc/hostname', '/home/user/hostname'), 'rename /etc/hostname as user')
    await rejectsDenied(sbx.files.list('/root'), 'list /root as user')
    await rejectsDenied(sbx.files.read('/etc/shadow'), 'read /etc/shadow as user')

    assert.equal((await sbx.commands.run('sha256sum /etc/shadow', { user: 'root' })).stdout, shadowSum, '/etc/shadow untouched')
    assert.equal((await run(sbx, 'test -e /etc/forkbox-e2e || test -e /etc/forkbox-dir')).exitCode, 1, 'nothing created in /etc')
    assert.equal((await run(sbx, 'test -f /etc/hostname')).exitCode, 0, '/etc/hostname still there')
    assert.equal((await run(sbx, 'sudo -n true')).exitCode, 0, 'sudo still works')
    assert.notEqual((await run(sbx, 'touch /etc/forkbox-cmd')).exitCode, 0, 'a command as user cannot write /etc either')

    const w = await sbx.files.write('/etc/forkbox-e2e', 'by root', { user: 'root' })
    assert.equal(w.path, '/etc/forkbox-e2e')
    assert.equal((await sbx.files.getInfo('/etc/forkbox-e2e', { user: 'root' })).owner, 'root')
    assert.equal(await sbx.files.makeDir('/etc/forkbox-dir', { user: 'root' }), true)
    assert.ok((await sbx.files.list('/root', { user: 'root' })).length >= 0)

    // A supplementary group grants what it grants, looked up per request.
    await sbx.commands.run('groupadd -f e2eshare && usermod -aG e2eshare user && install -d -o root -g e2eshare -m 2770 /srv/shared', { user: 'root' })
    const shared = await sbx.files.write('/srv/shared/by-user.txt', 'via the group')
    assert.equal(shared.path, '/srv/shared/by-user.txt')
    assert.equal((await sbx.commands.run('stat -c %U:%G /srv/shared/by-user.txt')).stdout, 'user:e2eshare\n')
  } finally {
    await kill(sbx)
  }
})

// ---------------------------------------------------------------- metadata

test('metadata: write (multipart, octet-stream, several files), getInfo, list, rename, setfattr, clear', T, async () => {
  const sbx = await create()
  try {
    const md = { Author: 'e2e', purpose: 'round trip' }
    const want = { author: 'e2e', purpose: 'round trip' }
    const w = await sbx.files.write('meta/a.txt', 'hello', { metadata: md })
    assert.deepEqual(w.metadata, want, 'multipart write result')
    const o = await sbx.files.write('meta/b.txt', 'octets', { metadata: md, useOctetStream: true })
    assert.deepEqual(o.metadata, want, 'octet-stream write result')
    const many = await sbx.files.write([{ path: 'meta/c.txt', data: 'c' }, { path: 'meta/d/e.txt', data: 'e' }], { metadata: { batch: '7' } })
    assert.equal(many.length, 2)
    for (const f of many) assert.deepEqual(f.metadata, { batch: '7' }, `multi-file ${f.path}`)

    assert.deepEqual((await sbx.files.getInfo('meta/a.txt')).metadata, want, 'getInfo')
    const listed = Object.fromEntries((await sbx.files.list('meta')).map((e) => [e.name, e.metadata]))
    assert.deepEqual(listed['a.txt'], want, 'list')
    assert.deepEqual(listed['c.txt'], { batch: '7' }, 'list')
    assert.equal(listed.d, undefined, 'a directory has no metadata')

    const moved = await sbx.files.rename('meta/a.txt', 'meta/renamed/a.txt')
    assert.deepEqual(moved.metadata, want, 'rename result')
    assert.equal((await sbx.commands.run('getfattr --only-values -n user.e2b.author meta/renamed/a.txt')).stdout, 'e2e')

    await sbx.commands.run('setfattr -n user.e2b.tool -v setfattr meta/b.txt && setfattr -n user.plain -v hidden meta/b.txt')
    assert.deepEqual((await sbx.files.getInfo('meta/b.txt')).metadata, { ...want, tool: 'setfattr' }, 'user.e2b.* shows, user.* does not')

    const again = await sbx.files.write('meta/b.txt', 'new body')
    assert.equal(again.metadata, undefined, 'a write without metadata clears it')
    assert.equal((await sbx.files.getInfo('meta/b.txt')).metadata, undefined)
    assert.equal((await sbx.commands.run('getfattr --only-values -n user.plain meta/b.txt')).stdout, 'hidden', 'other xattrs stay')
  } finally {
    await kill(sbx)
  }
})

test('metadata survives pause/resume and a fork', { timeout: 150_000 }, async () => {
  const sbx = await create()
  try {
    await sbx.files.write('kept.txt', 'k', { metadata: { phase: 'before-pause' } })
    await sbx.files.write('/etc/root-kept', 'r', { user: 'root', metadata: { owner: 'root' } })
    assert.equal(await sbx.pause(), true)
    const resumed = await Sandbox.connect(sbx.sandboxId)
    assert.deepEqual((await resumed.files.getInfo('kept.txt')).metadata, { phase: 'before-pause' }, 'after resume')
    assert.deepEqual((await resumed.files.getInfo('/etc/root-kept')).metadata, { owner: 'root' }, 'a root file after resume')
    await resumed.files.rename('kept.txt', 'kept-renamed.txt')

    const forks = await resumed.fork({ count: 1 })
    assert.equal(forks.length, 1)
    assert.ok(!(forks[0] instanceof Error), `fork failed: ${forks[0]}`)
    created.add(forks[0].sandboxId)
    assert.deepEqual((await forks[0].files.getInfo('kept-renamed.txt')).metadata, { phase: 'before-pause' }, 'in the fork')
    await kill(forks[0])
  } finally {
    await kill(sbx)
  }
})

// metaOf returns the metadata of each path in sbx (undefined when none).
async function metaOf(sbx, paths) {
  const out = {}
  for (const p of paths) out[p] = (await sbx.files.getInfo(p, { user: 'root' })).metadata
  return out
}

test('metadata survives a snapshot → new sandbox, a rollback and a filesystem-only pause', { timeout: 240_000 }, async () => {
  const sbx = await create()
  const made = []
  const snaps = []
  try {
    // An empty value is valid metadata (printable ASCII, none of it).
    await sbx.files.write('kept.txt', 'k', { metadata: { phase: 'one', empty: '' } })
    await sbx.files.write('/etc/root-kept', 'r', { user: 'root', metadata: { owner: 'root' } })
    await sbx.commands.run('setfattr -n user.e2b.tool -v setfattr kept.txt')
    const paths = ['/home/user/kept.txt', '/etc/root-kept']
    const want = { '/home/user/kept.txt': { phase: 'one', empty: '', tool: 'setfattr' }, '/etc/root-kept': { owner: 'root' } }
    assert.deepEqual(await metaOf(sbx, paths), want, 'as written')

    const snap = await sbx.createSnapshot()
    snaps.push(snap.snapshotId)
    await sbx.files.write('kept.txt', 'changed', { metadata: { phase: 'two' } })
    const fromSnap = await Sandbox.create(snap.snapshotId, { timeoutMs: 120_000 })
    made.push(fromSnap)
    assert.deepEqual(await metaOf(fromSnap, paths), want, 'in a sandbox created from the snapshot')

    const rb = await api('POST', `/sandboxes/${sbx.sandboxId}/rollback`, { body: { snapshotID: snap.snapshotId } })
    assert.equal(rb.status, 200, JSON.stringify(rb.error))
    assert.deepEqual(await metaOf(sbx, paths), want, 'after a rollback to the snapshot')

    assert.equal(await sbx.pause({ keepMemory: false }), true)
    const fsSnap = await sbx.createSnapshot() // of the files-only pause
    snaps.push(fsSnap.snapshotId)
    const fromFiles = await Sandbox.create(fsSnap.snapshotId, { timeoutMs: 120_000 })
    made.push(fromFiles)
    assert.deepEqual(await metaOf(fromFiles, paths), want, 'in a sandbox created from a snapshot of a files-only pause')
    const resumed = await Sandbox.connect(sbx.sandboxId)
    assert.deepEqual(await metaOf(resumed, paths), want, 'after a files-only pause and connect')
    assert.deepEqual((await resumed.files.list('.')).find((e) => e.name === 'kept.txt').metadata, want[paths[0]], 'list after it')
  } finally {
    for (const s of made) await s.kill().catch(() => {})
    await kill(sbx)
    for (const id of snaps) await Sandbox.deleteSnapshot(id)
  }
})

// ---------------------------------------------------------------- files edge cases

test('remove of a missing path succeeds', T, async () => {
  const sbx = await create()
  try {
    await sbx.files.remove('/home/user/never-existed.txt')
    await sbx.files.remove('no/such/dir')
    await sbx.files.write('gone.txt', 'x')
    await sbx.files.remove('gone.txt')
    await sbx.files.remove('gone.txt')
    assert.equal(await sbx.files.exists('gone.txt'), false)
  } finally {
    await kill(sbx)
  }
})

// fetchSigned fetches a signed URL the way a browser holding only the URL
// would (plus the routing headers when the sandbox URL is shared).
async function fetchSigned(sbx, url) {
  const headers = process.env.E2B_SANDBOX_URL ? { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' } : {}
  const res = await fetch(url, { headers })
  return { status: res.status, body: await res.text() }
}

test('signed URLs: envd\'s exact 401 bodies; the signature is checked before the expiry', T, async () => {
  const sbx = await create({ secure: true })
  try {
    await sbx.files.write('signed.txt', 'signed')
    const envdError = (message) => ({ status: 401, body: JSON.stringify({ code: 401, message }) })
    const trim = (r) => ({ status: r.status, body: r.body.trim() })

    const short = await sbx.downloadUrl('signed.txt', { useSignatureExpiration: 1 })
    assert.equal((await fetchSigned(sbx, short)).status, 200)
    await sleep(2500)
    assert.deepEqual(trim(await fetchSigned(sbx, short)), envdError('signature is already expired'))

    const forgedExpired = new URL(short)
    forgedExpired.searchParams.set('signature', 'v1_' + 'A'.repeat(43))
    assert.deepEqual(trim(await fetchSigned(sbx, forgedExpired)), envdError('invalid signature'))

    const unsigned = new URL(await sbx.downloadUrl('signed.txt'))
    unsigned.searchParams.delete('signature')
    assert.deepEqual(trim(await fetchSigned(sbx, unsigned)), envdError('missing signature query parameter'))

    const headers = { 'X-Access-Token': 'not-the-token' }
    if (process.env.E2B_SANDBOX_URL) Object.assign(headers, { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' })
    const res = await fetch(await sbx.downloadUrl('signed.txt'), { headers })
    assert.deepEqual({ status: res.status, body: (await res.text()).trim() }, envdError('access token present in header but does not match'))
  } finally {
    await kill(sbx)
  }
})

// ---------------------------------------------------------------- base template

// getViaHost sends GET path to the daemon with Host: sbx.getHost(port), the
// name a client builds for any port of the sandbox.
function getViaHost(sbx, port, path) {
  const api = new URL(SANDBOX_URL)
  return new Promise((resolve, reject) => {
    const req = http.get({ host: api.hostname, port: api.port, path, headers: { Host: sbx.getHost(port) }, timeout: 10_000 }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c) => (body += c))
      res.on('end', () => resolve({ status: res.statusCode, body }))
    })
    req.on('error', reject)
    req.on('timeout', () => req.destroy(new Error('timeout')))
  })
}

test('base template: python -m http.server started by a client is reached through getHost', T, async () => {
  const sbx = await create()
  try {
    await sbx.files.write('www/hello.txt', 'served by python')
    const server = await sbx.commands.run('python -m http.server 8000 --bind 0.0.0.0', { background: true, cwd: '/home/user/www' })
    await waitFor('port 8000 in ss -ltn', async () => / [^ ]*:8000 /.test((await run(sbx, 'ss -ltnH')).stdout), 15_000, 200)
    assert.equal((await run(sbx, 'pgrep -f "http.server 8000"')).exitCode, 0, 'pgrep finds the server')
    const host = sbx.getHost(8000)
    assert.ok(host.startsWith(`8000-${sbx.sandboxId}.`), host)
    const res = await getViaHost(sbx, 8000, '/hello.txt')
    assert.equal(res.status, 200, `GET via ${host}: ${res.status} ${res.body}`)
    assert.equal(res.body, 'served by python')
    await server.kill()
  } finally {
    await kill(sbx)
  }
})

test('base template: python, pip, node, npm, a C toolchain, curl, git, sudo, ss, pgrep, attr', T, async () => {
  const sbx = await create()
  try {
    const tools = {
      'python --version': /^Python 3\./,
      'readlink -f "$(command -v python)"': /python3/,
      'pip --version': /^pip \d+.*python 3/,
      'node --version': /^v\d+\./,
      'npm --version': /^\d+\.\d+/,
      'node -e "console.log(6*7)"': /^42$/m,
      'gcc --version': /^gcc /,
      'make --version': /^GNU Make /,
      'curl --version': /^curl /,
      'git --version': /^git version /,
      'sudo -n true && echo ok': /^ok$/m,
      'ss --version': /iproute2/,
      'pgrep --version': /procps/,
      'setfattr --version && getfattr --version': /getfattr/,
    }
    for (const [cmd, re] of Object.entries(tools)) {
      const r = await run(sbx, cmd)
      assert.equal(r.exitCode, 0, `${cmd}: exit ${r.exitCode} ${r.stderr}`)
      assert.match(r.stdout + r.stderr, re, cmd)
    }
    await sbx.files.write('hello.c', '#include <stdio.h>\nint main(void){puts("compiled");return 0;}\n')
    assert.equal((await sbx.commands.run('gcc -o hello hello.c && ./hello')).stdout, 'compiled\n')
    const pipList = await run(sbx, 'pip list --disable-pip-version-check')
    assert.equal(pipList.exitCode, 0, pipList.stderr)
  } finally {
    await kill(sbx)
  }
})
