// The image store with the unmodified npm `e2b` SDK, run by test/e2e
// (TestTemplateStorage) with FBX_IMAGE naming a busybox image in a
// loopback registry and FBX_IMAGES_DIR the daemon's image store: a template
// deleted while sandboxes or snapshots use it keeps what they run on, and
// its layers and image leave the disk within seconds of the last user
// going.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { Sandbox, Template } from 'e2b'

const IMAGE = process.env.FBX_IMAGE
const DIR = process.env.FBX_IMAGES_DIR
assert.ok(IMAGE && DIR, 'FBX_IMAGE and FBX_IMAGES_DIR must be set (run through `go test ./test/e2e -run TestTemplateStorage`)')
const T = { timeout: 240_000 }
const suffix = Date.now().toString(36)
const created = new Set()
after(async () => {
  for (const id of created) await Sandbox.kill(id).catch(() => {})
})

// entries are the committed layers and template images on disk.
function entries() {
  const out = new Set()
  for (const kind of ['layers', 'templates']) {
    for (const n of readdirSync(join(DIR, kind))) if (!n.startsWith('.')) out.add(`${kind}/${n}`)
  }
  return out
}

const missing = (list) => { const now = entries(); return list.filter((e) => !now.has(e)) }
const present = (list) => { const now = entries(); return list.filter((e) => now.has(e)) }

// heldAfterDelete checks what of a deleted template's content stays for
// its users: the layer they run on and the image they started from, no
// more (the layers below it, the image's unpacked rootfs among them, go
// at once: a layer is a whole tree, sharing files by hard link).
function heldAfterDelete(added) {
  const kept = present(added)
  assert.equal(kept.filter((e) => e.startsWith('layers/')).length, 1, `layers kept: ${kept}`)
  assert.equal(kept.filter((e) => e.startsWith('templates/')).length, 1, `images kept: ${kept}`)
  return kept
}

// buildNew builds a template and returns the entries its build added.
async function buildNew(tpl, name) {
  const before = entries()
  await Template.build(tpl, name)
  const added = [...entries()].filter((e) => !before.has(e))
  assert.ok(added.some((e) => e.startsWith('layers/')) && added.some((e) => e.startsWith('templates/')), `build ${name} added ${added}`)
  return added
}

// goneWithin polls until none of list is on disk; it returns the time it
// took, or fails naming what stayed.
async function goneWithin(list, ms) {
  const t0 = performance.now()
  while (present(list).length > 0) {
    assert.ok(performance.now() - t0 < ms, `still on disk after ${ms} ms: ${present(list)}`)
    await new Promise((r) => setTimeout(r, 50))
  }
  return Math.round(performance.now() - t0)
}

async function deleteTemplate(name) {
  const res = await fetch(`${process.env.E2B_API_URL}/templates/${encodeURIComponent(name)}`, {
    method: 'DELETE',
    headers: { 'X-API-Key': process.env.E2B_API_KEY },
  })
  assert.equal(res.status, 204, `delete ${name}: ${res.status} ${await res.text()}`)
}

async function create(name) {
  const sbx = await Sandbox.create(name, { timeoutMs: 120_000 })
  created.add(sbx.sandboxId)
  return sbx
}

async function kill(sbx) {
  await sbx.kill()
  created.delete(sbx.sandboxId)
}

// A unique RUN step gives each template layers of its own (the image's
// unpacked rootfs and base layer are shared by every template of it).
const own = (name) => Template().fromImage(IMAGE).runCmd(`echo ${name} > /own`, { user: 'root' })

test('a deleted template: its running and paused sandboxes work on; the last one\'s kill frees its layers and image within seconds', T, async () => {
  const name = `fbx-st-sbx-${suffix}`
  const added = await buildNew(own(name), name)
  const running = await create(name)
  const paused = await create(name)
  assert.equal(await paused.pause(), true)
  await deleteTemplate(name)
  assert.equal(await Template.exists(name), false)
  const kept = heldAfterDelete(added)
  assert.equal((await running.commands.run('cat /own')).stdout, `${name}\n`)
  await kill(running)
  await new Promise((r) => setTimeout(r, 500))
  assert.deepEqual(missing(kept), [], 'the paused sandbox\'s content went with the other sandbox')
  const resumed = await Sandbox.connect(paused.sandboxId)
  assert.equal((await resumed.commands.run('cat /own')).stdout, `${name}\n`)
  await kill(resumed)
  const ms = await goneWithin(added, 5000)
  console.log(`the last sandbox's layers and image left the disk ${ms} ms after its kill`)
})

test('a snapshot holds a deleted template\'s content for its sandboxes until it is deleted', T, async () => {
  const name = `fbx-st-snap-${suffix}`
  const added = await buildNew(own(name), name)
  const sbx = await create(name)
  await sbx.commands.run('echo kept > /tmp/state', { user: 'root' })
  const snap = await sbx.createSnapshot()
  await deleteTemplate(name)
  await kill(sbx)
  await new Promise((r) => setTimeout(r, 500))
  const kept = heldAfterDelete(added)
  const restored = await create(snap.snapshotId)
  assert.equal((await restored.commands.run('cat /own /tmp/state')).stdout, `${name}\nkept\n`)
  await kill(restored)
  assert.deepEqual(missing(kept), [], 'content a snapshot holds went with a sandbox started from it')
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
  const ms = await goneWithin(added, 5000)
  console.log(`the snapshot's layers and image left the disk ${ms} ms after its deletion`)
})

test('a failed build\'s layers go with its template', T, async () => {
  const name = `fbx-st-fail-${suffix}`
  const before = entries()
  await assert.rejects(Template.build(own(name).runCmd('exit 3', { user: 'root' }), name))
  const added = [...entries()].filter((e) => !before.has(e))
  assert.ok(added.some((e) => e.startsWith('layers/')), `the failed build kept no layer for a retry: ${added}`)
  await deleteTemplate(name)
  await goneWithin(added, 5000)
})
