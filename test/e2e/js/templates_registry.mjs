// Template builds from an OCI image, run by test/e2e (TestTemplateRegistry)
// with FBX_IMAGE naming a static busybox image (no bash, no user `user`)
// that the Go test pushed to a loopback registry and the daemon reaches as
// docker.io/... through --registry-mirror.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
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
