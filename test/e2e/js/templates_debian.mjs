// Template builds from Debian images the Go test made with debootstrap
// from the Debian mirror and pushed to its loopback registry
// (TestTemplateRegistry/debian): FBX_DEBIAN_IMAGE names it as docker.io/...
// (through --registry-mirror), and so do the SDK's fromDebianImage() and
// fromPythonImage() (docker.io/library/debian:stable, python:3).
// aptInstall fetches from the Debian mirror and npmInstall from the npm
// registry, inside the build sandbox.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { deleteTemplate } from './helpers.mjs'
import { Sandbox, Template } from 'e2b'

const IMAGE = process.env.FBX_DEBIAN_IMAGE
assert.ok(IMAGE, 'FBX_DEBIAN_IMAGE must be set (run through `go test ./test/e2e -run TestTemplateRegistry/debian`)')
const T = { timeout: 900_000 }
const suffix = Date.now().toString(36)
const created = new Set()
const built = new Set()

after(async () => {
  for (const id of created) await Sandbox.kill(id).catch(() => {})
  for (const n of [...built].reverse()) await deleteTemplate(n).catch(() => {})
})

async function build(tpl, name) {
  const logs = []
  const t0 = performance.now()
  try {
    await Template.build(tpl, name, { onBuildLogs: (e) => logs.push(e.message) })
  } catch (e) {
    console.log(logs.slice(-40).join('\n'))
    throw e
  }
  built.add(name)
  console.log(`built ${name} in ${Math.round(performance.now() - t0)} ms`)
  return logs
}

async function check(name, cmd, want) {
  const sbx = await Sandbox.create(name, { timeoutMs: 120_000 })
  created.add(sbx.sandboxId)
  const r = await sbx.commands.run(cmd)
  await sbx.kill()
  created.delete(sbx.sandboxId)
  if (want instanceof RegExp) assert.match(r.stdout, want)
  else assert.equal(r.stdout, want)
}

const node = `node-${suffix}`

test('fromImage(debian).aptInstall(nodejs, npm).npmInstall(...): packages from the Debian mirror and the npm registry', T, async () => {
  const tpl = Template()
    .fromImage(IMAGE)
    .aptInstall(['nodejs', 'npm'], { noInstallRecommends: true })
    .setUser('user')
    .setWorkdir('/home/user/app')
    .npmInstall(['is-odd@3.0.1'])
    .npmInstall(['is-number@7.0.0'], { g: true })
  const logs = await build(tpl, node)
  assert.ok(logs.some((l) => l.includes('pulled')), 'the image was pulled')
  await check(node, 'whoami; pwd; node -e "console.log(require(\'is-odd\')(3))"; ls /usr/local/lib/node_modules',
    'user\n/home/user/app\ntrue\nis-number\n')
  // The host's CA bundle served the build's HTTPS (npm) and stayed out
  // of the template: no file, no variable. NODE_EXTRA_CA_CERTS names
  // what every sandbox gets, the egress proxy's one CA, not the host's.
  await check(node, 'find / -xdev -name "*forkbox-host-ca*" 2>/dev/null; echo "${SSL_CERT_FILE:-none} ${NODE_EXTRA_CA_CERTS:-none}"; grep -c "BEGIN CERTIFICATE" "$NODE_EXTRA_CA_CERTS"',
    'none /usr/local/share/ca-certificates/forkbox-egress.crt\n1\n')
})

test('fromTemplate: a template built on another user template keeps its files, user and workdir', T, async () => {
  const name = `on-node-${suffix}`
  await build(Template().fromTemplate(node).runCmd('node -e "process.stdout.write(String(require(\'is-odd\')(4)))" > odd.txt'), name)
  await check(name, 'whoami; pwd; cat odd.txt', 'user\n/home/user/app\nfalse')
})

test('fromDebianImage() and fromPythonImage() resolve docker.io through the registry mirror', T, async () => {
  const deb = `deb-${suffix}`
  const logs = await build(Template().fromDebianImage().runCmd('cat /etc/debian_version > /tmp/v', { user: 'root' }), deb)
  assert.ok(logs.some((l) => l.includes('debian:stable')), logs.join('\n'))
  await check(deb, 'cut -d. -f1 /tmp/v', '12\n')
  const py = `py-${suffix}`
  await build(Template().fromPythonImage().runCmd('python3 -c "print(6*7)" > /tmp/p'), py)
  await check(py, 'cat /tmp/p; python3 --version', /^42\nPython 3\.11\./)
})
