// Egress rules with the unmodified npm `e2b` client (run by
// test/e2e/egress_test.go, which builds the outside world first: servers
// on TEST-NET-2 and on the metadata address in a namespace of its own,
// and a DNS server for *.egress.test that the daemon's egress proxy uses).
// Every server answers "<server> host=<Host>": A, B, C, or M (metadata).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { run, waitFor } from './helpers.mjs'
import { daemonGet as api, seenHeader, recPath, hosts, curlCode, neverInside } from './egress_world.mjs'

const A = process.env.EGRESS_WEB_A
const B = process.env.EGRESS_WEB_B
const C = process.env.EGRESS_WEB_C
const M = process.env.EGRESS_METADATA
const CA = process.env.EGRESS_CA_PEM
const API_PORT = process.env.FORKBOX_API_HOST_PORT.split(':').pop()

const live = new Set()
after(async () => {
  for (const s of live) await s.kill().catch(() => {})
})

async function create(opts = {}) {
  const sbx = await Sandbox.create('base', { timeoutMs: 180_000, ...opts })
  live.add(sbx)
  await sbx.files.write('/tmp/ca.pem', CA)
  return sbx
}

async function kill(sbx) {
  await sbx.kill()
  live.delete(sbx)
}

// get fetches url (extra curl args allowed) and returns the body, or
// null when the connection failed or was refused.
async function get(sbx, args) {
  const r = await run(sbx, `curl -sS -m 4 --cacert /tmp/ca.pem ${args}`)
  return r.exitCode === 0 ? r.stdout : null
}

// reach: did server `want` answer? (a 403 from the egress proxy is a no)
async function reach(sbx, args, want) {
  const body = await get(sbx, args)
  return body !== null && body.startsWith(want + ' ')
}

async function tcp(sbx, ip, port) {
  const r = await run(sbx, `python3 -c "import socket;s=socket.create_connection(('${ip}',${port}),3);print(s.recv(64).decode())"`)
  return r.exitCode === 0 && r.stdout.includes('tcp-echo')
}

async function udp(sbx, ip, port) {
  const r = await run(sbx, `python3 -c "import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(2);s.sendto(b'x',('${ip}',${port}));print(s.recv(64).decode())"`)
  return r.exitCode === 0 && r.stdout.includes('udp-echo')
}

// forbiddenUnreachable checks the metadata address and the daemon's API
// (on the sandbox's gateway and the host's outside address) answer nothing.
async function forbiddenUnreachable(sbx, label) {
  assert.equal(await reach(sbx, `http://${M}/`, 'M'), false, `${label}: metadata address reached`)
  assert.equal(await reach(sbx, `--resolve metadata.egress.test:80:${M} http://metadata.egress.test/`, 'M'), false, `${label}: metadata by name`)
  const gw = await run(sbx, `python3 -c "import socket;s=socket.socket(2,2);s.connect(('${A}',9));a=s.getsockname()[0].split('.');print('.'.join(a[:3]+['1']))"`)
  assert.equal(gw.exitCode, 0, gw.stderr)
  for (const host of [gw.stdout.trim(), '198.51.100.1']) {
    const r = await run(sbx, `curl -sS -m 3 http://${host}:${API_PORT}/health`)
    assert.notEqual(r.exitCode, 0, `${label}: daemon API reachable at ${host}:${API_PORT}: ${r.stdout}`)
  }
}

test('address rules: deny by CIDR, allow by CIDR, allow beats deny', { timeout: 240_000 }, async () => {
  const sbx = await create({ network: { denyOut: ['198.51.100.0/24'], allowOut: [`${C}/32`] } })
  assert.equal(await reach(sbx, `http://${A}/`, 'A'), false, 'A in a denied CIDR')
  assert.equal(await reach(sbx, `http://${B}/`, 'B'), false, 'B in a denied CIDR')
  assert.equal(await reach(sbx, `http://${C}/`, 'C'), true, 'C allowed out of the denied CIDR')
  assert.equal(await reach(sbx, `https://${C}/ -k`, 'C'), true, 'C on 443')
  assert.equal(await tcp(sbx, A, 7000), false, 'TCP to a denied address')
  assert.equal(await udp(sbx, A, 7001), false, 'UDP to a denied address')
  const info = await Sandbox.getInfo(sbx.sandboxId)
  assert.deepEqual(info.network.denyOut, ['198.51.100.0/24'])
  assert.deepEqual(info.network.allowOut, [`${C}/32`])
  await forbiddenUnreachable(sbx, 'CIDR rules')
  await kill(sbx)

  const one = await create({ network: { denyOut: [B] } })
  assert.equal(await reach(one, `http://${A}/`, 'A'), true, 'A not denied')
  assert.equal(await tcp(one, A, 7000), true, 'TCP to an undenied address')
  assert.equal(await udp(one, A, 7001), true, 'UDP to an undenied address')
  assert.equal(await reach(one, `http://${B}/`, 'B'), false, 'B denied by address')
  await kill(one)

  const alone = await create({ network: { allowOut: [C] } })
  assert.equal(await reach(alone, `http://${A}/`, 'A'), true, 'allowOut alone restricts nothing')
  await forbiddenUnreachable(alone, 'allowOut alone')
  await kill(alone)

  const off = await create({ allowInternetAccess: false, network: { allowOut: [C] } })
  assert.equal(await reach(off, `http://${A}/`, 'A'), false, 'no internet')
  assert.equal(await reach(off, `http://${C}/`, 'C'), true, 'allowOut beats allow_internet_access=false')
  await kill(off)
})

test('domain rules: Host and SNI allow-list, wildcards, no mismatch trick, no private resolution', { timeout: 240_000 }, async () => {
  const sbx = await create({
    network: {
      denyOut: ['0.0.0.0/0'],
      allowOut: ['allowed.egress.test', '*.wild.egress.test', 'private.egress.test', 'metadata.egress.test'],
    },
  })
  const at = (name, ip, port = 443) => `--resolve ${name}:${port}:${ip} https://${name}/`
  assert.equal(await get(sbx, `-H 'Host: allowed.egress.test' http://${A}/`), 'A host=allowed.egress.test', 'allowed Host')
  assert.equal(await reach(sbx, at('allowed.egress.test', A), 'A'), true, 'allowed SNI')
  const refused = await get(sbx, `-H 'Host: other.egress.test' http://${A}/`)
  assert.match(refused ?? '', /forkbox egress: other.egress.test is not allowed/, 'a refused name on the same IP gets the proxy 403')
  assert.equal(await reach(sbx, at('other.egress.test', A), 'A'), false, 'a refused SNI on the same IP')
  assert.equal(await reach(sbx, at('a.wild.egress.test', A), 'A'), true, 'wildcard')
  assert.equal(await reach(sbx, at('x.y.wild.egress.test', A), 'A'), true, 'wildcard at depth')
  assert.equal(await reach(sbx, at('wild.egress.test', A), 'A'), false, 'wildcard apex')
  // The sandbox names an allowed domain but dials B: the proxy connects to
  // the name's own address, so B never sees the request.
  assert.equal(await get(sbx, `-H 'Host: allowed.egress.test' http://${B}/`), 'A host=allowed.egress.test', 'Host trick')
  assert.equal(await get(sbx, at('allowed.egress.test', B)), 'A host=allowed.egress.test', 'SNI trick')
  assert.equal(await reach(sbx, `-H 'Host: private.egress.test' http://${A}/`, 'A'), false, 'a name resolving to a private address')
  assert.equal(await reach(sbx, `http://${B}/`, 'B'), false, 'an IP outside the allow-list')
  assert.equal(await tcp(sbx, A, 7000), false, 'other ports follow the address rules')
  assert.equal(await udp(sbx, A, 7001), false, 'UDP follows the address rules')
  await forbiddenUnreachable(sbx, 'domain rules')
  await kill(sbx)
})

test('PUT /network tightens and loosens a running sandbox', { timeout: 240_000 }, async () => {
  const sbx = await create()
  assert.equal(await reach(sbx, `http://${A}/`, 'A'), true, 'before')
  await sbx.updateNetwork({ denyOut: [A] })
  assert.equal(await reach(sbx, `http://${A}/`, 'A'), false, 'tightened: A denied')
  assert.equal(await reach(sbx, `http://${B}/`, 'B'), true, 'tightened: B still fine')
  assert.deepEqual((await Sandbox.getInfo(sbx.sandboxId)).network.denyOut, [`${A}/32`])
  await assert.rejects(sbx.updateNetwork({ denyOut: ['allowed.egress.test'] }), /allowOut/)
  assert.equal(await reach(sbx, `http://${A}/`, 'A'), false, 'a refused update changed nothing')
  await sbx.updateNetwork({ denyOut: ['0.0.0.0/0'], allowOut: ['allowed.egress.test'] })
  assert.equal(await reach(sbx, `--resolve allowed.egress.test:443:${A} https://allowed.egress.test/`, 'A'), true, 'domain allowed at run time')
  assert.equal(await reach(sbx, `http://${B}/`, 'B'), false, 'everything else denied at run time')
  await forbiddenUnreachable(sbx, 'after PUT')
  await sbx.updateNetwork({})
  assert.equal(await reach(sbx, `http://${A}/`, 'A'), true, 'loosened: an omitted field is cleared')
  assert.equal(await reach(sbx, `http://${B}/`, 'B'), true, 'loosened: B')
  await forbiddenUnreachable(sbx, 'no rules')
  await kill(sbx)
})

test('rules survive pause/resume and go with a fork', { timeout: 240_000 }, async () => {
  const sbx = await create({ network: { denyOut: [A] } })
  assert.equal(await sbx.pause(), true)
  const again = await Sandbox.connect(sbx.sandboxId)
  assert.equal(await reach(again, `http://${A}/`, 'A'), false, 'after resume: A denied')
  assert.equal(await reach(again, `http://${B}/`, 'B'), true, 'after resume: B fine')
  const [fork] = await again.fork({ count: 1 })
  live.add(fork)
  assert.equal(await reach(fork, `http://${A}/`, 'A'), false, 'fork: A denied')
  assert.equal(await reach(fork, `http://${B}/`, 'B'), true, 'fork: B fine')
  await kill(fork)
  await kill(sbx)
})


test('denials are counted per sandbox, listed with their rule, logged and exported', { timeout: 240_000 }, async () => {
  const sbx = await create({ network: { denyOut: ['0.0.0.0/0'], allowOut: ['allowed.egress.test'] } })
  const quiet = await create()
  assert.equal(await reach(sbx, `-H 'Host: other.egress.test' http://${A}/`, 'A'), false, 'unlisted name')
  assert.equal(await tcp(sbx, A, 7000), false, 'denied address, other port')
  assert.equal(await tcp(sbx, M, 7000), false, 'metadata address, other port')
  let st
  await waitFor('the denials counted', async () => {
    st = await api(`/sandboxes/${sbx.sandboxId}/network`)
    const by = st.denials.byReason
    return by.name >= 1 && by.denyOut >= 1 && by.forbidden >= 1
  }, 15_000, 250).catch((e) => assert.fail(`${e.message}: ${JSON.stringify(st)}`))
  assert.deepEqual(st.network.denyOut, ['0.0.0.0/0'])
  const find = (f) => st.denials.recent.find(f)
  assert.ok(find((d) => d.layer === 'proxy' && d.name === 'other.egress.test' && d.destination === `${A}:80` && d.reason === 'name'),
    `proxy denial listed: ${JSON.stringify(st.denials.recent)}`)
  assert.ok(find((d) => d.layer === 'kernel' && d.destination === A && d.rule === 'denyOut 0.0.0.0/0'), 'kernel denyOut listed')
  assert.ok(find((d) => d.layer === 'kernel' && d.destination === M && d.rule === 'forbidden range 169.254.0.0/16'), 'kernel guard listed')
  const other = await api(`/sandboxes/${quiet.sandboxId}/network`)
  assert.equal(other.denials.total, 0, 'another sandbox counts nothing')
  const logs = await api(`/v2/sandboxes/${sbx.sandboxId}/logs?limit=1000`)
  const lines = logs.logs.map((l) => l.message)
  assert.ok(lines.includes(`egress denied: ${A}:80 (other.egress.test)`), `proxy denial logged: ${lines}`)
  assert.ok(lines.includes(`egress denied: ${M}`), 'kernel denial logged')
  const metrics = await api('/metrics')
  assert.match(metrics, /forkbox_egress_denied_total\{layer="proxy",reason="name"\} [1-9]/)
  assert.match(metrics, /forkbox_egress_denied_total\{layer="kernel",reason="forbidden"\} [1-9]/)
  await kill(quiet)
  await kill(sbx)
})

// ---- rules, egressProxy and the data plane's settings ----

const CONTROL = process.env.EGRESS_CONTROL
const SOCKS = process.env.EGRESS_SOCKS
const SOCKS_IP = process.env.EGRESS_SOCKS_IP
const SOCKS_USER = process.env.EGRESS_SOCKS_USER
const SOCKS_PASS = process.env.EGRESS_SOCKS_PASS


async function socksSeen() {
  return (await fetch(`${CONTROL}/socks`)).json()
}

async function socksSwitch(op) {
  const res = await fetch(`${CONTROL}/socks/${op}`, { method: 'POST' })
  assert.equal(res.status, 200, `socks ${op}`)
}




const secretRules = (secret) => ({
  'allowed.egress.test': [
    { transform: { headers: { Authorization: 'Bearer overwritten' } } },
    { transform: { headers: { authorization: `Bearer ${secret}`, 'X-Rule': 'exact' } } },
  ],
  '*.wild.egress.test': [{ transform: { headers: { 'X-Rule': 'wild' } } }],
  'a.wild.egress.test': [{ transform: { headers: { 'X-Rule': 'exact-a' } } }],
})


test('rules: headers injected into HTTPS and HTTP that the sandbox never sees; exact beats wildcard; Host≠SNI refused', { timeout: 240_000 }, async () => {
  const secret = `s3cret-${Date.now()}`
  const sbx = await create({ network: { denyOut: ['0.0.0.0/0'], allowOut: ['allowed.egress.test', '*.wild.egress.test'], rules: secretRules(secret) } })
  await hosts(sbx)
  const bodies = []
  const p1 = recPath('https')
  const https = await curlCode(sbx, `https://allowed.egress.test${p1} -H 'Authorization: Bearer mine'`)
  bodies.push(https)
  assert.equal(https, '200 A host=allowed.egress.test', 'HTTPS through the interception')
  assert.equal(await seenHeader('A', p1, 'Authorization'), `Bearer ${secret}`, 'the server saw the rule\'s header, not the sandbox\'s')
  assert.equal(await seenHeader('A', p1, 'X-Rule'), 'exact')
  // Trusting only the servers' own CA fails: the sandbox talked to the
  // egress proxy's certificate, which the egress CA signed.
  assert.equal(await get(sbx, `https://allowed.egress.test${recPath('own-ca')}`), null, 'intercepted, not end to end')
  const p2 = recPath('http')
  const http = await curlCode(sbx, `http://allowed.egress.test${p2}`)
  bodies.push(http)
  assert.equal(http, '200 A host=allowed.egress.test', 'plain HTTP')
  assert.equal(await seenHeader('A', p2, 'Authorization'), `Bearer ${secret}`, 'plain HTTP got the header')
  const p3 = recPath('node')
  const node = await run(sbx, `node -e "fetch('https://allowed.egress.test${p3}').then(r => r.text()).then(console.log)"`)
  bodies.push(node.stdout)
  assert.equal(node.stdout.trim(), 'A host=allowed.egress.test', `Node trusts the egress CA: ${node.stderr}`)
  for (const [host, want] of [['a.wild.egress.test', 'exact-a'], ['x.y.wild.egress.test', 'wild']]) {
    const p = recPath(host)
    assert.equal(await curlCode(sbx, `https://${host}${p}`), `200 A host=${host}`)
    assert.equal(await seenHeader('A', p, 'X-Rule'), want, `${host}: the exact key beats the wildcard`)
  }
  const pf = recPath('front')
  const front = await curlCode(sbx, `https://allowed.egress.test${pf} -H 'Host: b.egress.test'`)
  assert.match(front ?? '', /^421 /, 'Host other than the SNI refused')
  assert.equal(await seenHeader('A', pf, 'Authorization'), '', 'nothing went upstream')
  assert.equal(await seenHeader('B', pf, 'Authorization'), '', 'nothing went to B')
  const info = await Sandbox.getInfo(sbx.sandboxId)
  assert.ok(info.network.rules['allowed.egress.test'], `getInfo reports the rules: ${JSON.stringify(info.network)}`)
  await neverInside(sbx, secret, bodies)
  await forbiddenUnreachable(sbx, 'rules')
  await kill(sbx)
})

test('rules grant nothing; updateNetwork sets and clears them at run time', { timeout: 240_000 }, async () => {
  const secret = `upd-${Date.now()}`
  const sbx = await create({ network: { denyOut: ['0.0.0.0/0'], rules: secretRules(secret) } })
  await hosts(sbx)
  const p0 = recPath('denied')
  assert.equal(await reach(sbx, `https://allowed.egress.test${p0} --cacert /etc/ssl/certs/ca-certificates.crt`, 'A'), false, 'HTTPS: rules alone grant nothing')
  assert.match(await get(sbx, `http://allowed.egress.test${p0}`) ?? '', /forkbox egress: allowed.egress.test is not allowed/, 'HTTP: the proxy\'s 403')
  assert.equal(await seenHeader('A', p0, 'Authorization'), '', 'no request arrived')
  await sbx.updateNetwork({ denyOut: ['0.0.0.0/0'], allowOut: ['allowed.egress.test'], rules: secretRules(secret) })
  const p1 = recPath('set')
  assert.equal(await curlCode(sbx, `https://allowed.egress.test${p1}`), '200 A host=allowed.egress.test')
  assert.equal(await seenHeader('A', p1, 'Authorization'), `Bearer ${secret}`, 'rules set at run time')
  await sbx.updateNetwork({ denyOut: ['0.0.0.0/0'], allowOut: ['allowed.egress.test'] })
  const p2 = recPath('cleared')
  assert.equal(await get(sbx, `https://allowed.egress.test${p2}`), 'A host=allowed.egress.test', 'end to end again (the servers\' CA)')
  assert.equal(await seenHeader('A', p2, 'Authorization'), '', 'rules cleared')
  assert.equal((await Sandbox.getInfo(sbx.sandboxId)).network.rules, undefined)
  await kill(sbx)
})

const proxyOpts = () => ({ address: SOCKS, username: SOCKS_USER, password: SOCKS_PASS })

test('egressProxy: traffic through the SOCKS5 server, by name when allowed by name; fail closed; no password back', { timeout: 240_000 }, async () => {
  const sbx = await create({ network: { egressProxy: proxyOpts() } })
  let before = (await socksSeen()).length
  assert.equal(await get(sbx, `http://${A}/`), `A host=${A}`, 'HTTP through the tunnel')
  assert.equal(await tcp(sbx, A, 7000), true, 'a server that speaks first, through the tunnel')
  assert.deepEqual((await socksSeen()).slice(before), [`ip ${A}:80`, `ip ${A}:7000`], 'the SOCKS server carried both, by address')
  assert.equal(await udp(sbx, A, 7001), true, 'UDP is not tunnelled: it goes out directly')
  before = (await socksSeen()).length
  await forbiddenUnreachable(sbx, 'tunnelled')
  assert.deepEqual((await socksSeen()).slice(before).filter((d) => d.includes(M) || d.includes(API_PORT)), [], 'forbidden destinations never reach the tunnel')
  const info = await Sandbox.getInfo(sbx.sandboxId)
  assert.deepEqual(info.network.egressProxy, { address: SOCKS, username: SOCKS_USER }, 'getInfo: no password')
  const raw = await (await fetch(`${process.env.E2B_API_URL}/sandboxes/${sbx.sandboxId}`, { headers: { 'X-API-Key': process.env.E2B_API_KEY } })).text()
  assert.ok(!raw.includes(SOCKS_PASS), 'the API never returns the password')

  await socksSwitch('stop')
  try {
    const p = recPath('down')
    assert.equal(await reach(sbx, `http://${A}${p}`, 'A'), false, 'proxy down: the connection fails')
    assert.equal(await seenHeader('A', p, 'User-Agent'), '', 'nothing went out directly')
  } finally {
    await socksSwitch('start')
  }
  assert.equal(await get(sbx, `http://${A}/`), `A host=${A}`, 'back once the proxy is')

  // Names allowOut lists go by name (remote DNS), with the rules' headers.
  const secret = `tunnel-${Date.now()}`
  await sbx.updateNetwork({ denyOut: ['0.0.0.0/0'], allowOut: ['allowed.egress.test'], rules: secretRules(secret), egressProxy: proxyOpts() })
  await hosts(sbx)
  before = (await socksSeen()).length
  const p = recPath('named')
  assert.equal(await curlCode(sbx, `https://allowed.egress.test${p}`), '200 A host=allowed.egress.test')
  assert.equal(await seenHeader('A', p, 'Authorization'), `Bearer ${secret}`, 'headers through the tunnel')
  assert.deepEqual((await socksSeen()).slice(before), ['name allowed.egress.test:443'], 'by name')
  assert.equal(await reach(sbx, `http://${B}/`, 'B'), false, 'filtered before the tunnel')

  // Cleared at run time: direct again; set again: tunnelled.
  await sbx.updateNetwork({})
  before = (await socksSeen()).length
  assert.equal(await get(sbx, `http://${A}/`), `A host=${A}`)
  assert.deepEqual((await socksSeen()).slice(before), [], 'no tunnel after clearing')
  assert.equal((await Sandbox.getInfo(sbx.sandboxId)).network?.egressProxy, undefined)
  await sbx.updateNetwork({ egressProxy: proxyOpts() })
  assert.equal(await get(sbx, `http://${B}/`), `B host=${B}`)
  assert.deepEqual((await socksSeen()).slice(before), [`ip ${B}:80`], 'tunnelled again')
  await kill(sbx)

  for (const address of ['private.egress.test:1080', 'nowhere.egress.test:1080', '10.0.0.1:1080', `${M}:1080`]) {
    await assert.rejects(Sandbox.create('base', { network: { egressProxy: { address } } }), /egressProxy/, `${address} refused before the sandbox exists`)
  }
  await assert.rejects(Sandbox.create('base', { network: { egressProxy: { address: SOCKS, password: 'x' } } }), /username/)
})

test('rules and the egress proxy after pause/resume, in a fork and from a snapshot', { timeout: 300_000 }, async () => {
  const secret = `follow-${Date.now()}`
  const network = { denyOut: ['0.0.0.0/0'], allowOut: ['allowed.egress.test'], rules: secretRules(secret), egressProxy: proxyOpts() }
  const sbx = await create({ network })
  await hosts(sbx)
  const check = async (box, label) => {
    const before = (await socksSeen()).length
    const p = recPath(label)
    assert.equal(await curlCode(box, `https://allowed.egress.test${p}`), '200 A host=allowed.egress.test', label)
    assert.equal(await seenHeader('A', p, 'Authorization'), `Bearer ${secret}`, `${label}: header`)
    assert.deepEqual((await socksSeen()).slice(before), ['name allowed.egress.test:443'], `${label}: tunnelled`)
    assert.equal(await reach(box, `http://${B}/`, 'B'), false, `${label}: B denied`)
  }
  await check(sbx, 'created')
  assert.equal(await sbx.pause(), true)
  const again = await Sandbox.connect(sbx.sandboxId)
  await check(again, 'resumed')
  const [fork] = await again.fork({ count: 1 })
  live.add(fork)
  await check(fork, 'fork')
  await kill(fork)
  const snap = await again.createSnapshot()
  const child = await Sandbox.create(snap.snapshotId, { timeoutMs: 180_000 })
  live.add(child)
  await check(child, 'snapshot')
  await kill(child)
  await kill(sbx)
})

// serverScript answers every GET with the Host it got, over TLS when
// given a certificate (for httpsPorts).
const serverScript = `
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = ('host=' + self.headers.get('Host', '')).encode()
        self.send_response(200); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(('0.0.0.0', int(sys.argv[1])), H)
if len(sys.argv) > 2:
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain(sys.argv[2], sys.argv[3]); s.socket = c.wrap_socket(s.socket, server_side=True)
s.serve_forever()
`

async function viaDataPlane(sbx, port, headers = {}) {
  const res = await fetch(`${process.env.E2B_SANDBOX_URL}/`, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': String(port), ...headers } })
  return `${res.status} ${await res.text()}`
}

test('data plane: maskRequestHost, httpsPorts, allowPublicTraffic false', { timeout: 240_000 }, async () => {
  const sbx = await create({ network: { maskRequestHost: '${PORT}-masked.egress.test', httpsPorts: [8443], allowPublicTraffic: false } })
  await sbx.files.write('/tmp/srv.py', serverScript)
  await sbx.files.write('/tmp/inner.pem', process.env.EGRESS_INNER_CERT)
  await sbx.files.write('/tmp/inner.key', process.env.EGRESS_INNER_KEY)
  await sbx.commands.run('python3 /tmp/srv.py 8000', { background: true })
  await sbx.commands.run('python3 /tmp/srv.py 8443 /tmp/inner.pem /tmp/inner.key', { background: true })
  await waitFor('the servers', async () => (await run(sbx, 'ss -ltn | grep -c ":8000 \\|:8443 "')).stdout.trim() === '2', 15_000, 200)
  assert.ok(sbx.trafficAccessToken, 'the create answered a traffic access token')
  const token = { 'e2b-traffic-access-token': sbx.trafficAccessToken }
  assert.match(await viaDataPlane(sbx, 8000), /^403 /, 'no token: 403')
  assert.match(await viaDataPlane(sbx, 8000, { 'e2b-traffic-access-token': 'wrong' }), /^403 /, 'a wrong token: 403')
  assert.equal(await viaDataPlane(sbx, 8000, token), '200 host=8000-masked.egress.test', 'the token: 200, and the Host is the mask')
  assert.equal(await viaDataPlane(sbx, 8443, token), '200 host=8443-masked.egress.test', 'an httpsPorts port over TLS (self-signed)')
  const info = await Sandbox.getInfo(sbx.sandboxId)
  assert.equal(info.network.maskRequestHost, '${PORT}-masked.egress.test')
  assert.deepEqual(info.network.httpsPorts, [8443])
  assert.equal(info.network.allowPublicTraffic, false)
  await kill(sbx)
  await assert.rejects(Sandbox.create('base', { network: { httpsPorts: [49983] } }), /envd port/)
})
