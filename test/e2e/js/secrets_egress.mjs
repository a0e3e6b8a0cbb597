// Secrets and workload identity in requests, with the unmodified npm `e2b`
// client (run by test/e2e/secrets_test.go in the egress test's outside
// world): a secret's current value put into HTTP and intercepted HTTPS
// requests by the egress proxy, never readable inside the sandbox, updated
// live, refused once deleted; a workload token verified by a relying
// party (go-oidc against the daemon's discovery document and JWKS) with
// its audience checked, a fork's subject its own.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, Secret } from 'e2b'
import { run, waitFor } from './helpers.mjs'
import { daemonGet, seenHeader, recPath, hosts, curlCode, neverInside } from './egress_world.mjs'

const RP = process.env.SECRETS_RP // the relying party's address
const RP_CONTROL = process.env.SECRETS_RP_CONTROL // what it was sent, on loopback

// lastToken is the raw token the relying party last got from sandbox id.
async function lastToken(id) {
  const res = await fetch(`${RP_CONTROL}/token?sandbox=${id}`)
  assert.equal(res.status, 200, `no token from ${id}`)
  return res.text()
}
const AUD = 'https://rp.egress.test'

const live = new Set()
const secrets = new Set()
after(async () => {
  for (const s of live) await s.kill().catch(() => {})
  for (const n of secrets) await Secret.destroy(n).catch(() => {})
})

async function create(opts) {
  const sbx = await Sandbox.create('base', { timeoutMs: 180_000, ...opts })
  live.add(sbx)
  await hosts(sbx, { 'rp.egress.test': RP })
  return sbx
}

test('a secret goes into HTTP and HTTPS requests, never into the sandbox; updated live; deleted → refused', { timeout: 240_000 }, async () => {
  const name = `e2e-egress-${Date.now()}`
  const v1 = `sk-one-${Math.random().toString(36).slice(2)}`
  const v2 = `sk-two-${Math.random().toString(36).slice(2)}`
  await Secret.create(name, v1)
  secrets.add(name)
  const sbx = await create({
    network: {
      denyOut: ['0.0.0.0/0'], allowOut: ['allowed.egress.test'],
      rules: { 'allowed.egress.test': [{ transform: { headers: { Authorization: `Bearer ${Secret.fill(name)}`, 'X-Plain': 'as-is' } } }] },
    },
  })
  const bodies = []
  const p1 = recPath('secret-https')
  bodies.push(await curlCode(sbx, `https://allowed.egress.test${p1} -H 'Authorization: Bearer mine'`))
  assert.equal(bodies.at(-1), '200 A host=allowed.egress.test', 'HTTPS through the interception')
  assert.equal(await seenHeader('A', p1, 'Authorization'), `Bearer ${v1}`, 'HTTPS: the server saw the secret, not the sandbox\'s header')
  assert.equal(await seenHeader('A', p1, 'X-Plain'), 'as-is')
  const p2 = recPath('secret-http')
  bodies.push(await curlCode(sbx, `http://allowed.egress.test${p2}`))
  assert.equal(await seenHeader('A', p2, 'Authorization'), `Bearer ${v1}`, 'plain HTTP got the secret')
  // The rule the sandbox can read holds the placeholder, never the value.
  const info = await Sandbox.getInfo(sbx.sandboxId)
  assert.ok(!JSON.stringify(info).includes(v1), 'getInfo carries the value')
  assert.match(JSON.stringify(info.network.rules), /\$\{e2b\.secrets\./)
  await neverInside(sbx, v1, bodies)

  assert.equal((await Secret.update(name, v2)).version, 2)
  const p3 = recPath('secret-updated')
  assert.equal(await curlCode(sbx, `https://allowed.egress.test${p3}`), '200 A host=allowed.egress.test')
  assert.equal(await seenHeader('A', p3, 'Authorization'), `Bearer ${v2}`, 'an update shows on the next request')
  // One keep-alive connection, the secret updated between its requests.
  const p4 = recPath('keepalive-1'); const p5 = recPath('keepalive-2')
  assert.equal((await run(sbx, `curl -sS -m 8 http://allowed.egress.test${p4} http://allowed.egress.test${p5}`)).exitCode, 0)
  assert.equal(await seenHeader('A', p5, 'Authorization'), `Bearer ${v2}`)
  // Paused and resumed (memory kept), the rule still names the secret.
  assert.equal(await sbx.pause(), true)
  const again = await Sandbox.connect(sbx.sandboxId)
  const pr = recPath('after-resume')
  assert.equal(await curlCode(again, `https://allowed.egress.test${pr}`), '200 A host=allowed.egress.test')
  assert.equal(await seenHeader('A', pr, 'Authorization'), `Bearer ${v2}`, 'after pause/resume')

  assert.equal(await Secret.destroy(name), true)
  const p6 = recPath('secret-deleted')
  const refused = await curlCode(sbx, `https://allowed.egress.test${p6}`)
  assert.match(refused ?? '', /^502 forkbox egress: request to allowed\.egress\.test not sent: header Authorization: secret "e2e-egress-[0-9]+" does not exist/, `deleted secret: ${refused}`)
  assert.equal(await seenHeader('A', p6, 'Host'), '', 'nothing went upstream')
  const p7 = recPath('secret-deleted-http')
  assert.match(await curlCode(sbx, `http://allowed.egress.test${p7}`) ?? '', /^502 /)
  assert.equal(await seenHeader('A', p7, 'Host'), '', 'no placeholder sent as written')
  let st
  await waitFor('the refusal listed', async () => {
    st = await daemonGet(`/sandboxes/${sbx.sandboxId}/network`)
    return st.denials.byReason.placeholder >= 2
  }, 15_000, 250).catch((e) => assert.fail(`${e.message}: ${JSON.stringify(st)}`))
  assert.ok(st.denials.recent.some((d) => d.reason === 'placeholder' && d.name === 'allowed.egress.test' && /does not exist/.test(d.rule)))
  const logs = await daemonGet(`/v2/sandboxes/${sbx.sandboxId}/logs?limit=1000`)
  assert.ok(logs.logs.some((l) => l.message.startsWith('egress denied') && /placeholder/.test(JSON.stringify(l))), 'refusal logged')
  await sbx.kill(); live.delete(sbx)
})

// verify asks the relying party (through the egress proxy, which puts the
// token in) to verify the request's token; it answers the claims or 401.
async function verify(sbx, scheme, query = '') {
  const out = await curlCode(sbx, `${scheme}://rp.egress.test/verify${query}`)
  assert.ok(out, `${scheme} to the relying party failed`)
  const i = out.indexOf(' ')
  return { status: Number(out.slice(0, i)), body: out.slice(i + 1) }
}

test('a workload token is verified by a relying party with go-oidc; audience checked; a fork has its own subject', { timeout: 300_000 }, async () => {
  const sbx = await create({
    iam: { tokens: { rp: Secret.iamToken({ audience: AUD, tokenType: 'JWT-SVID' }) } },
    network: {
      denyOut: ['0.0.0.0/0'], allowOut: ['rp.egress.test'],
      rules: { 'rp.egress.test': [{ transform: ({ iam }) => ({ headers: { Authorization: `Bearer ${iam.tokens.rp}` } }) }] },
    },
  })
  const bodies = []
  for (const scheme of ['http', 'https']) {
    const r = await verify(sbx, scheme)
    bodies.push(r.body)
    assert.equal(r.status, 200, `${scheme}: the relying party refused the token: ${r.body}`)
    const c = JSON.parse(r.body)
    assert.deepEqual(c.aud, [AUD], 'aud exactly as given')
    assert.equal(c.sandbox_id, sbx.sandboxId)
    assert.match(c.sub, new RegExp(`^spiffe://127\\.0\\.0\\.1/team/default/template/[^/]+/sandbox/${sbx.sandboxId}$`))
    assert.ok(c.exp - c.iat <= 15 * 60, `lifetime ${c.exp - c.iat} s`)
  }
  const wrong = await verify(sbx, 'http', '?aud=https://someone-else.test')
  assert.equal(wrong.status, 401, `another audience accepted: ${wrong.body}`)
  assert.match(wrong.body, /audience/)
  const parentSub = JSON.parse(bodies[0]).sub
  const token = await lastToken(sbx.sandboxId)
  assert.match(token, /^eyJ/, 'a JWT')
  await neverInside(sbx, token, bodies)
  const [fork] = await sbx.fork({ count: 1 })
  live.add(fork)
  const fr = await verify(fork, 'https')
  assert.equal(fr.status, 200, fr.body)
  const fc = JSON.parse(fr.body)
  assert.equal(fc.sandbox_id, fork.sandboxId, 'the fork speaks for itself')
  assert.notEqual(fc.sub, parentSub, 'a fork gets its own subject')
  assert.notEqual(await lastToken(fork.sandboxId), token, 'never its parent\'s token')
  assert.match(fc.sub, new RegExp(`/sandbox/${fork.sandboxId}$`))
  for (const s of [fork, sbx]) { await s.kill(); live.delete(s) }
})
