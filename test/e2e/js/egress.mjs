// Egress rules with the unmodified npm `e2b` client (run by
// test/e2e/egress_test.go, which builds the outside world first: servers
// on TEST-NET-2 and on the metadata address in a namespace of its own,
// and a DNS server for *.egress.test that the daemon's egress proxy uses).
// Every server answers "<server> host=<Host>": A, B, C, or M (metadata).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { run, waitFor } from './helpers.mjs'

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

// api calls the daemon's control API with the client's key (the network
// status route is a forkbox extension the npm client does not know).
async function api(path) {
  const res = await fetch(`${process.env.E2B_API_URL}${path}`, { headers: { 'X-API-Key': process.env.E2B_API_KEY } })
  assert.equal(res.status, 200, `${path}: ${res.status}`)
  return path === '/metrics' ? res.text() : res.json()
}

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
