// Template builds from an OCI image, run by test/e2e (TestTemplateRegistry)
// with FBX_IMAGE naming a static busybox image (no bash, no user `user`)
// that the Go test pushed to a loopback registry and the daemon reaches as
// docker.io/... through --registry-mirror.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { deleteTemplate } from './helpers.mjs'
import { Sandbox, Template } from 'e2b'

const IMAGE = process.env.FBX_IMAGE
assert.ok(IMAGE, 'FBX_IMAGE must be set (run through `go test ./test/e2e -run TestTemplateRegistry`)')
const T = { timeout: 240_000 }
const suffix = Date.now().toString(36)
const created = new Set()
after(async () => {
  for (const id of created) await Sandbox.kill(id).catch(() => {})
})

const ctxDir = mkdtempSync(join(tmpdir(), 'fbx-reg-'))
writeFileSync(join(ctxDir, 'app.txt'), 'copied\n')

async function check(name, cmd, want) {
  const sbx = await Sandbox.create(name, { timeoutMs: 60_000 })
  created.add(sbx.sandboxId)
  const r = await sbx.commands.run(cmd)
  assert.equal(r.stdout, want)
  await sbx.kill()
  created.delete(sbx.sandboxId)
}

test('fromImage (docker.io/... through the mirror): RUN, COPY, ENV, WORKDIR, USER in a bash-less image', T, async () => {
  const name = `fbx-bb-${suffix}`
  const logs = []
  const tpl = Template({ fileContextPath: ctxDir })
    .fromImage(IMAGE)
    .setEnvs({ STEP_ENV: 'from-step' })
    .runCmd('test ! -e /etc/gone && cat /etc/motd > /tmp/motd', { user: 'root' })
    .copy('app.txt', '/work/app.txt', { user: 'user' })
    .setWorkdir('/work')
    .setUser('user')
    .runCmd('id -un > /tmp/who')
  try {
    await Template.build(tpl, name, { onBuildLogs: (e) => logs.push(e.message) })
  } catch (e) {
    console.log(logs.join('\n'))
    throw e
  }
  assert.ok(logs.some((l) => l.includes('pulled')), logs.join('\n'))
  await check(name, 'pwd; cat /tmp/who app.txt /tmp/motd; echo "$IMAGE_ENV $STEP_ENV"', '/work\nuser\ncopied\nlayer two\nfrom-config from-step\n')
})

test('fromDockerfile: the SDK parses it, forkbox builds it', T, async () => {
  const name = `fbx-df-${suffix}`
  const tpl = Template().fromDockerfile(`FROM ${IMAGE}\nENV DF=yes\nRUN echo from-dockerfile > /df\nWORKDIR /tmp\n`)
  await Template.build(tpl, name)
  await check(name, 'cat /df; echo "$DF"; pwd', 'from-dockerfile\nyes\n/tmp\n')
})

test('an unknown image fails the build at step base', T, async () => {
  await assert.rejects(Template.build(Template().fromImage('docker.io/fbx/nosuch:1'), `fbx-none-${suffix}`), (e) => {
    assert.match(e.message, /nosuch/)
    return true
  })
})

test('tags name builds: assignTags, getTags, removeTags; name:tag starts the build it names', T, async () => {
  const name = `fbx-tags-${suffix}`
  const v1 = await Template.build(Template().fromImage(IMAGE).runCmd('echo one > /v', { user: 'root' }), `${name}:v1`)
  const v2 = await Template.build(Template().fromImage(IMAGE).runCmd('echo two > /v', { user: 'root' }), `${name}:v2`)
  const assigned = await Template.assignTags(`${name}:v1`, ['prod', 'stable'])
  assert.equal(assigned.buildId, v1.buildId)
  assert.deepEqual(assigned.tags, ['prod', 'stable'])
  const tags = await Template.getTags(v1.templateId)
  const byTag = Object.fromEntries(tags.map((t) => [t.tag, t.buildId]))
  assert.deepEqual(byTag, { v1: v1.buildId, v2: v2.buildId, prod: v1.buildId, stable: v1.buildId })
  assert.ok(tags.every((t) => t.createdAt instanceof Date && !isNaN(t.createdAt)))
  await check(`${name}:prod`, 'cat /v', 'one\n')
  await check(name, 'cat /v', 'two\n')
  await Template.removeTags(name, 'prod')
  await assert.rejects(Sandbox.create(`${name}:prod`, { timeoutMs: 30_000 }))
  await assert.rejects(Template.removeTags(name, 'nope'), /nope/)
  await check(`${name}:stable`, 'cat /v', 'one\n')
  await deleteTemplate(name)
})

test('a ready command that never succeeds fails the build with its reason', T, async () => {
  const t0 = performance.now()
  await assert.rejects(
    Template.build(Template().fromImage(IMAGE).setStartCmd('sleep 1000', 'false'), `fbx-notready-${suffix}`),
    (e) => {
      assert.match(e.message, /ready command 'false' did not succeed within 5s/)
      return true
    },
  )
  console.log(`ready timeout reported after ${Math.round(performance.now() - t0)} ms`)
})

test('registry auth: the right password pulls, a wrong or missing one fails clearly', T, async () => {
  const img = process.env.FBX_AUTH_IMAGE
  const user = process.env.FBX_AUTH_USER
  const name = `fbx-auth-${suffix}`
  await Template.build(Template().fromImage(img, { username: user, password: process.env.FBX_AUTH_PASS }).runCmd('echo authed > /a', { user: 'root' }), name)
  await check(name, 'cat /a', 'authed\n')
  await assert.rejects(Template.build(Template().fromImage(img, { username: user, password: 'wrong' }), `${name}-bad`), (e) => {
    assert.match(e.message, /the registry refused the credentials/)
    return true
  })
  await assert.rejects(Template.build(Template().fromImage(img), `${name}-none`), (e) => {
    assert.match(e.message, /authentication required/)
    return true
  })
  await deleteTemplate(name)
})

// Layers and images are content-addressed in <data>/images: a template's
// own go with it, one another template shares stays until that one goes.
test('deleting templates reclaims their layers and images; a shared layer stays while used', T, async () => {
  const dir = process.env.FBX_IMAGES_DIR
  const count = (sub) => readdirSync(join(dir, sub)).filter((n) => !n.includes('.')).length
  const shared = () => Template().fromImage(IMAGE).runCmd('echo shared > /s', { user: 'root' })
  const a = `fbx-gc-a-${suffix}`
  const b = `fbx-gc-b-${suffix}`
  await Template.build(shared().runCmd('echo a > /a', { user: 'root' }), a)
  await Template.build(shared().runCmd('echo b > /b', { user: 'root' }), b)
  const layers = count('layers')
  const imgs = count('templates')
  await deleteTemplate(a)
  assert.equal(count('layers'), layers - 1, 'only template a\'s own layer goes')
  assert.equal(count('templates'), imgs - 1)
  await check(b, 'cat /s /b', 'shared\nb\n')
  await deleteTemplate(b)
  assert.equal(count('layers'), layers - 3, 'the shared layer goes with its last template')
  assert.equal(count('templates'), imgs - 2)
  assert.ok(!readdirSync(join(dir, 'layers')).some((n) => n.startsWith('.new-')))
})
