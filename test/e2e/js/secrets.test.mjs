// E2B's Secret API with the unmodified npm `e2b` client: create, getInfo
// (by id and by name), exists, list with paging, update (version + 1),
// destroy, and the 400s of rules that name an unknown secret or iam token.
// Injection into requests and workload identity need the outside world:
// secrets_egress.mjs (run by test/e2e/secrets_test.go).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, Secret, SecretNotFoundError } from 'e2b'
import { api, tracked } from './helpers.mjs'

const box = tracked()
const prefix = `e2e-${Date.now()}-`
const made = []
after(async () => {
  for (const n of made) await Secret.destroy(n).catch(() => {})
})

test('secrets: create, read, list, update, destroy; values never returned', async () => {
  const value = `sk-e2e-${Math.random().toString(36).slice(2)}`
  const name = `${prefix}API-Key`
  const info = await Secret.create(name, value, { metadata: { owner: 'e2e' } })
  made.push(info.secretId)
  assert.equal(info.name, name.toLowerCase(), 'names are lower-cased')
  assert.equal(info.version, 1)
  assert.deepEqual(info.metadata, { owner: 'e2e' })
  assert.ok(info.createdAt instanceof Date && !isNaN(info.createdAt))
  assert.ok(info.secretId.startsWith('sec_'))
  assert.equal((await Secret.getInfo(info.secretId)).name, info.name)
  assert.equal((await Secret.getInfo(name)).secretId, info.secretId, 'found by name, any case')
  assert.equal(await Secret.exists(info.name), true)
  assert.equal(await Secret.exists(`${prefix}nope`), false)
  await assert.rejects(Secret.create(name, 'again'), (e) => !(e instanceof SecretNotFoundError), 'a taken name')
  const up = await Secret.update(info.name, value + '-2')
  assert.equal(up.version, 2)
  assert.deepEqual(up.metadata, { owner: 'e2e' }, 'metadata kept when not given')
  const up3 = await Secret.update(info.secretId, value + '-3', { metadata: { owner: 'e2e', rev: '3' } })
  assert.equal(up3.version, 3)
  assert.equal(up3.metadata.rev, '3')
  assert.ok(up3.updatedAt >= up3.createdAt)
  await assert.rejects(Secret.update(`${prefix}nope`, 'x'), SecretNotFoundError)
  await assert.rejects(Secret.getInfo(`${prefix}nope`), SecretNotFoundError)
  // No read returns the value: the raw answers of get and list.
  const raw = JSON.stringify([(await api('GET', '/secrets/{secretID}'.replace('{secretID}', info.secretId))).data,
    (await api('GET', '/secrets')).data])
  assert.ok(!raw.includes(value), 'a read carries the value')
  assert.equal(await Secret.destroy(info.name), true)
  assert.equal(await Secret.destroy(info.name), false)
  assert.equal(await Secret.exists(info.secretId), false)
})

test('secrets: list pages with a next token', async () => {
  for (const n of ['a', 'b', 'c']) made.push((await Secret.create(`${prefix}page-${n}`, 'v')).secretId)
  const p = Secret.list({ limit: 2 })
  const seen = []
  let pages = 0
  while (p.hasNext) {
    const items = await p.nextItems()
    assert.ok(items.length <= 2)
    seen.push(...items.map((s) => s.name))
    pages++
  }
  const mine = seen.filter((n) => n.startsWith(`${prefix}page-`))
  assert.deepEqual(mine, [`${prefix}page-a`, `${prefix}page-b`, `${prefix}page-c`])
  assert.ok(pages >= 2, `${pages} pages`)
})

// refused400 matches the SDK's error for a 400 whose message says why.
const refused400 = (why) => (e) => e.message.startsWith('400: ') && why.test(e.message)

test('secrets: rules naming an unknown secret or iam token are refused', async () => {
  const known = `${prefix}known`
  made.push((await Secret.create(known, 'v')).secretId)
  const rules = (value) => ({ 'api.example.test': [{ transform: { headers: { Authorization: value } } }] })
  await assert.rejects(Sandbox.create('base', { network: { rules: rules(`Bearer ${Secret.fill(`${prefix}missing`)}`) } }),
    refused400(/does not exist/))
  await assert.rejects(Sandbox.create('base', { network: { rules: rules('Bearer ${e2b.identity.tokens.nope}') } }),
    refused400(/iam token "nope"/))
  await assert.rejects(Sandbox.create('base', { iam: { tokens: { x: Secret.iamToken({ audience: 'a', tokenType: 'other' }) } } }),
    refused400(/JWT-SVID/))
  const sbx = await box.make({
    network: { rules: rules(`Bearer ${Secret.fill(known)}`) },
    iam: { tokens: { rp: Secret.iamToken({ audience: 'https://rp.example.test', tokenType: 'JWT-SVID' }) } },
  })
  await assert.rejects(sbx.updateNetwork({ rules: rules(`Bearer ${Secret.fill(`${prefix}missing`)}`) }), refused400(/does not exist/))
  // The update carries no iam, but the sandbox's tokens stay nameable.
  await sbx.updateNetwork({ rules: rules('Bearer ${e2b.identity.tokens.rp}') })
  await assert.rejects(sbx.updateNetwork({ rules: rules('Bearer ${e2b.identity.tokens.other}') }), refused400(/iam token "other"/))
  await box.kill(sbx)
})
