// E2B's data-plane conventions, checked with the unmodified npm `e2b` client:
// the default user, any port through the proxy (HTTP and WebSocket), the
// 502 of a gone sandbox, auto-resume by traffic, signed file URLs.
//
// Two modes:
//   - TLS (test/e2e/conventions_test.go): the daemon runs with
//     --domain forkbox.test --tls-listen 127.0.0.1:443, E2B_SANDBOX_URL is
//     unset, so the SDK talks to https://<port>-<id>.forkbox.test exactly as
//     to E2B's cloud. FORKBOX_E2E_HOSTS_FILE names /etc/hosts, where each
//     sandbox's host names are added (the Go runner restores the file), and
//     NODE_EXTRA_CA_CERTS trusts the daemon's generated CA.
//   - plain (test/e2e/e2e_test.go runs every *.test.mjs): E2B_SANDBOX_URL is
//     the daemon and ports are reached with the E2b-Sandbox-Id / -Port headers.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { appendFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import WebSocket from 'ws'
import { Sandbox } from 'e2b'
import { sleep, waitFor, run } from './helpers.mjs'

const T = { timeout: 90_000 }
const HOSTS_FILE = process.env.FORKBOX_E2E_HOSTS_FILE
const HOSTS_IP = process.env.FORKBOX_E2E_HOSTS_IP || '127.0.0.1'
const TLS = !!HOSTS_FILE
const SANDBOX_URL = process.env.E2B_SANDBOX_URL || process.env.E2B_API_URL
assert.ok(process.env.E2B_API_URL, 'E2B_API_URL must be set (run through `go test ./test/e2e`)')
if (TLS) {
  assert.ok(!process.env.E2B_SANDBOX_URL, 'TLS mode: E2B_SANDBOX_URL must be unset so the SDK builds https://<port>-<id>.<domain>')
  assert.ok(process.env.NODE_EXTRA_CA_CERTS, 'TLS mode: NODE_EXTRA_CA_CERTS must name the daemon CA')
}
console.log(`conventions: ${TLS ? 'TLS mode (https://<port>-<id>.<domain>)' : 'plain mode (E2b-Sandbox-* headers)'}`)

const HTTP_PORT = 8000
const WS_PORT = 8765
const created = new Set()

after(async () => {
  for (const id of created) await Sandbox.kill(id).catch(() => {})
})

// create makes a sandbox and, in TLS mode, makes its host names resolve
// before the SDK's first data-plane call (create itself makes none).
async function create(opts = {}) {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000, ...opts })
  created.add(sbx.sandboxId)
  if (TLS) {
    assert.equal(sbx.sandboxDomain, 'forkbox.test', 'create returns the --domain')
    const lines = [49983, HTTP_PORT, HTTP_PORT + 1, WS_PORT].map((p) => `${HOSTS_IP} ${sbx.getHost(p)} # forkbox-e2e\n`)
    appendFileSync(HOSTS_FILE, lines.join(''))
  }
  return sbx
}

async function kill(sbx) {
  created.delete(sbx.sandboxId)
  await sbx.kill()
}


// portTarget is where a client reaches `port` of sbx: the https host the
// SDK builds (TLS mode), or the sandbox URL with routing headers.
function portTarget(sbx, port, ws = false) {
  if (TLS) return { base: `${ws ? 'wss' : 'https'}://${sbx.getHost(port)}`, headers: {} }
  const base = ws ? SANDBOX_URL.replace(/^http/, 'ws') : SANDBOX_URL
  return { base, headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': String(port) } }
}

// fileHeaders are what a plain fetch of a signed file URL adds: nothing
// in TLS mode (the URL names the sandbox), the routing headers otherwise.
function fileHeaders(sbx) {
  return TLS ? {} : { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' }
}

async function startHTTPServer(sbx, dir = '/home/user/www') {
  const proc = await sbx.commands.run(`python3 -m http.server ${HTTP_PORT} --bind 0.0.0.0 --directory ${dir}`, { background: true })
  await waitListening(sbx, HTTP_PORT)
  return proc
}

async function waitListening(sbx, port) {
  await waitFor(`port ${port} to listen`, async () =>
    (await run(sbx, `python3 -c "import socket; socket.create_connection(('127.0.0.1', ${port}), 1)"`)).exitCode === 0,
  15_000, 200)
}

// ---------------------------------------------------------------- default user

test('default user: whoami, pwd, relative paths, ownership, root on request', T, async () => {
  const sbx = await create()
  try {
    assert.equal((await sbx.commands.run('whoami')).stdout, 'user\n')
    assert.equal((await sbx.commands.run('pwd')).stdout, '/home/user\n')
    assert.equal((await sbx.commands.run('id -u')).stdout, '1000\n')
    assert.equal((await sbx.commands.run('whoami', { user: 'root' })).stdout, 'root\n')
    assert.match((await sbx.commands.run('git --version')).stdout, /^git version /)

    await sbx.files.write('relative.txt', 'in the home')
    assert.equal((await sbx.commands.run('cat /home/user/relative.txt')).stdout, 'in the home')
    assert.equal((await sbx.commands.run('stat -c %U:%G /home/user/relative.txt')).stdout, 'user:user\n')
    assert.equal(await sbx.files.read('relative.txt'), 'in the home')
    await sbx.files.makeDir('made/by/api')
    assert.equal((await sbx.commands.run('stat -c %U /home/user/made/by/api')).stdout, 'user\n')

    await sbx.files.write('/root/by-root.txt', 'root wrote this', { user: 'root' })
    assert.equal((await sbx.commands.run('stat -c %U /root/by-root.txt', { user: 'root' })).stdout, 'root\n')
    const denied = await run(sbx, 'cat /root/by-root.txt')
    assert.notEqual(denied.exitCode, 0, 'user must not read root\'s home')
  } finally {
    await kill(sbx)
  }
})

test('default user: sudo without a password', T, async () => {
  const sbx = await create()
  try {
    const res = await run(sbx, 'sudo -n id -u')
    assert.equal(res.exitCode, 0, `sudo -n id -u: ${res.stderr}`)
    assert.equal(res.stdout, '0\n')
  } finally {
    await kill(sbx)
  }
})

// ---------------------------------------------------------------- any port

test('any port: HTTP through <port>-<id>.<domain>, bytes intact, closed port answers', T, async () => {
  const sbx = await create()
  try {
    assert.equal(sbx.getHost(HTTP_PORT), `${HTTP_PORT}-${sbx.sandboxId}.${sbx.sandboxDomain}`)
    await sbx.commands.run('mkdir -p /home/user/www && echo -n served > /home/user/www/hello.txt && head -c 8M /dev/urandom > /home/user/www/big.bin')
    const sum = (await sbx.commands.run('sha256sum /home/user/www/big.bin')).stdout.split(' ')[0]
    const server = await startHTTPServer(sbx)
    const { base, headers } = portTarget(sbx, HTTP_PORT)
    let res = await fetch(`${base}/hello.txt`, { headers })
    assert.equal(res.status, 200)
    assert.equal(await res.text(), 'served')
    res = await fetch(`${base}/big.bin`, { headers })
    assert.equal(res.status, 200)
    const body = Buffer.from(await res.arrayBuffer())
    assert.equal(body.length, 8 << 20)
    assert.equal(createHash('sha256').update(body).digest('hex'), sum)
    await server.kill()

    const closed = portTarget(sbx, 8001)
    res = await fetch(`${closed.base}/`, { headers: closed.headers, signal: AbortSignal.timeout(10_000) })
    assert.equal(res.status, 502, `closed port: ${res.status}`)
  } finally {
    await kill(sbx)
  }
})

// A WebSocket echo server with Python's standard library only: the
// handshake, and unfragmented frames (text, binary, ping, close).
const WS_SERVER = `
import base64, hashlib, socket, struct, sys, threading
GUID = b'258EAFA5-E914-47DA-95CA-C5AB0DC85B11'
def send(f, op, data):
    n = len(data)
    head = bytes([0x80 | op]) + (bytes([n]) if n < 126 else b'\\x7e' + struct.pack('>H', n) if n < 65536 else b'\\x7f' + struct.pack('>Q', n))
    f.write(head + data); f.flush()
def handle(c):
    f = c.makefile('rwb')
    try:
        headers = {}
        f.readline()
        for line in iter(f.readline, b'\\r\\n'):
            k, _, v = line.decode().partition(':'); headers[k.strip().lower()] = v.strip()
        accept = base64.b64encode(hashlib.sha1(headers['sec-websocket-key'].encode() + GUID).digest())
        f.write(b'HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: ' + accept + b'\\r\\n\\r\\n')
        send(f, 1, b'hello from ' + headers.get('host', '?').encode())
        while True:
            b0, b1 = f.read(2)
            op, n = b0 & 0x0f, b1 & 0x7f
            if n == 126: n = struct.unpack('>H', f.read(2))[0]
            elif n == 127: n = struct.unpack('>Q', f.read(8))[0]
            mask = f.read(4) if b1 & 0x80 else b'\\0\\0\\0\\0'
            data = bytes(x ^ mask[i % 4] for i, x in enumerate(f.read(n)))
            if op == 8: send(f, 8, data[:2]); return
            if op == 9: send(f, 10, data)
            elif op in (1, 2): send(f, op, (b'echo: ' if op == 1 else b'') + data)
    except Exception as e:
        print('ws handler:', e, file=sys.stderr)
    finally:
        c.close()
srv = socket.create_server(('0.0.0.0', int(sys.argv[1])))
while True:
    conn, _ = srv.accept()
    threading.Thread(target=handle, args=(conn,), daemon=True).start()
`

// wsOpen connects a ws client and queues what it receives.
function wsOpen(url, headers) {
  const ws = new WebSocket(url, { headers })
  const inbox = []
  ws.on('message', (data, isBinary) => inbox.push(isBinary ? Buffer.from(data) : data.toString()))
  const next = async () => {
    await waitFor('a WebSocket message', () => inbox.length > 0, 10_000, 20)
    return inbox.shift()
  }
  const opened = new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject) })
  return { ws, next, opened }
}

test('any port: WebSocket echo through the proxy, both directions', T, async () => {
  const sbx = await create()
  try {
    await sbx.files.write('ws_echo.py', WS_SERVER)
    const server = await sbx.commands.run(`python3 ws_echo.py ${WS_PORT}`, { background: true })
    await waitListening(sbx, WS_PORT)
    const { base, headers } = portTarget(sbx, WS_PORT, true)
    const { ws, next, opened } = wsOpen(`${base}/echo`, headers)
    await opened
    assert.match(await next(), /^hello from /, 'the server speaks first')
    for (const msg of ['one', 'two', 'x'.repeat(1000)]) {
      ws.send(msg)
      assert.equal(await next(), `echo: ${msg}`)
    }
    const bin = Buffer.from([0, 1, 2, 253, 254, 255])
    ws.send(bin)
    assert.deepEqual(await next(), bin)
    const closed = new Promise((resolve) => ws.once('close', (code) => resolve(code)))
    ws.close(1000)
    assert.equal(await closed, 1000)
    await server.kill()
  } finally {
    await kill(sbx)
  }
})

test('any port: the traffic token guards a private sandbox', T, async () => {
  const sbx = await create({ secure: true, network: { allowPublicTraffic: false } })
  try {
    assert.ok(sbx.trafficAccessToken, 'create returned a trafficAccessToken')
    await sbx.commands.run('mkdir -p /home/user/www && echo -n private > /home/user/www/p.txt')
    const server = await startHTTPServer(sbx)
    const { base, headers } = portTarget(sbx, HTTP_PORT)
    let res = await fetch(`${base}/p.txt`, { headers })
    assert.equal(res.status, 403, `without the traffic token: ${res.status}`)
    res = await fetch(`${base}/p.txt`, { headers: { ...headers, 'e2b-traffic-access-token': sbx.trafficAccessToken } })
    assert.equal(res.status, 200)
    assert.equal(await res.text(), 'private')
    await server.kill()
  } finally {
    await kill(sbx)
  }
})

test('any port: a killed sandbox answers 502 with E2B\'s body', T, async () => {
  const sbx = await create()
  await kill(sbx)
  const { base, headers } = portTarget(sbx, HTTP_PORT)
  const res = await fetch(`${base}/`, { headers })
  assert.equal(res.status, 502)
  assert.deepEqual(await res.json(), { message: 'The sandbox was not found', sandboxId: sbx.sandboxId, code: 502 })
})

test('any port: traffic resumes a paused auto-resume sandbox', T, async () => {
  const sbx = await create({ lifecycle: { onTimeout: 'pause', autoResume: true } })
  try {
    await sbx.commands.run('mkdir -p /home/user/www && echo -n awake > /home/user/www/a.txt')
    await startHTTPServer(sbx)
    await sbx.pause()
    assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'paused')
    const { base, headers } = portTarget(sbx, HTTP_PORT)
    const t0 = performance.now()
    const res = await fetch(`${base}/a.txt`, { headers })
    assert.equal(res.status, 200, `after pause: ${res.status}`)
    assert.equal(await res.text(), 'awake')
    console.log(`resumed by traffic in ${Math.round(performance.now() - t0)} ms`)
    assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'running')
  } finally {
    await kill(sbx)
  }
})

// ---------------------------------------------------------------- signed URLs

test('signed file URLs: plain fetch downloads and uploads; forged and expired are refused', T, async () => {
  const sbx = await create({ secure: true })
  try {
    await sbx.files.write('signed.txt', 'signed content')
    const h = fileHeaders(sbx)

    const down = await sbx.downloadUrl('signed.txt')
    if (TLS) assert.ok(down.startsWith(`https://49983-${sbx.sandboxId}.forkbox.test/files?`), down)
    let res = await fetch(down, { headers: h })
    assert.equal(res.status, 200, `signed download: ${res.status}`)
    assert.equal(await res.text(), 'signed content')

    const unsigned = new URL(down)
    unsigned.searchParams.delete('signature')
    res = await fetch(unsigned, { headers: h })
    assert.ok([401, 403].includes(res.status), `unsigned: ${res.status}`)
    const forged = new URL(down)
    forged.searchParams.set('signature', 'v1_' + 'A'.repeat(43))
    res = await fetch(forged, { headers: h })
    assert.ok([401, 403].includes(res.status), `forged: ${res.status}`)

    const up = await sbx.uploadUrl('uploaded.txt')
    const form = new FormData()
    form.append('file', new Blob(['uploaded with a signed url']), 'uploaded.txt')
    res = await fetch(up, { method: 'POST', body: form, headers: h })
    assert.equal(res.status, 200, `signed upload: ${res.status} ${await res.text()}`)
    assert.equal((await sbx.commands.run('cat /home/user/uploaded.txt')).stdout, 'uploaded with a signed url')
    assert.equal((await sbx.commands.run('stat -c %U /home/user/uploaded.txt')).stdout, 'user\n')

    const short = await sbx.downloadUrl('signed.txt', { useSignatureExpiration: 2 })
    res = await fetch(short, { headers: h })
    assert.equal(res.status, 200, `before expiry: ${res.status}`)
    await sleep(3500)
    res = await fetch(short, { headers: h })
    assert.ok([401, 403].includes(res.status), `after expiry: ${res.status}`)
  } finally {
    await kill(sbx)
  }
})
