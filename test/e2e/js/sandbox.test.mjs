// End-to-end tests of forkbox with the unmodified npm `e2b` client.
// Run by test/e2e/e2e_test.go (TestE2BClient) against a real daemon, with
// only E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY set.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes, createHash } from 'node:crypto'
import { writeFileSync, rmSync } from 'node:fs'
import {
  Sandbox,
  AuthenticationError,
  CommandExitError,
  NotFoundError,
  FileNotFoundError,
} from 'e2b'
import { sleep, waitFor, run } from './helpers.mjs'

const T = { timeout: 60_000 }
const API_URL = process.env.E2B_API_URL
const SANDBOX_URL = process.env.E2B_SANDBOX_URL || API_URL
assert.ok(API_URL, 'E2B_API_URL must be set (run through `go test ./test/e2e`)')

// Every sandbox a test creates, so `after` can kill leftovers of failed tests.
const created = new Set()

async function create(opts = {}) {
  const t0 = performance.now()
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000, ...opts })
  created.add(sbx.sandboxId)
  console.log(`created ${sbx.sandboxId} in ${ms(t0)}`)
  return sbx
}

async function kill(sbx) {
  created.delete(sbx.sandboxId)
  return sbx.kill()
}

after(async () => {
  for (const id of created) {
    await Sandbox.kill(id).catch(() => {})
  }
})

function ms(t0) {
  return `${Math.round(performance.now() - t0)} ms`
}


function ipv4Of(out) {
  const m = /inet (\d+\.\d+\.\d+\.\d+)\//.exec(out)
  assert.ok(m, `no IPv4 address in:\n${out}`)
  return m[1]
}

// ---------------------------------------------------------------- lifecycle

test('create with metadata and envs; getInfo', T, async () => {
  const tag = randomBytes(6).toString('hex')
  const sbx = await create({ timeoutMs: 90_000, metadata: { e2e: 'create', tag }, envs: { SBX_LEVEL: 'from-create' } })
  try {
    assert.match(sbx.sandboxId, /^\S+$/)
    const info = await sbx.getInfo()
    assert.equal(info.sandboxId, sbx.sandboxId)
    assert.equal(info.state, 'running')
    assert.deepEqual(info.metadata, { e2e: 'create', tag })
    assert.ok(info.envdVersion, 'envdVersion reported')
    assert.ok(info.cpuCount > 0, `cpuCount ${info.cpuCount}`)
    assert.ok(info.memoryMB > 0, `memoryMB ${info.memoryMB}`)
    assert.ok(info.startedAt instanceof Date && !isNaN(info.startedAt), 'startedAt is a date')
    const ttl = info.endAt - info.startedAt
    assert.ok(Math.abs(ttl - 90_000) <= 5_000, `endAt - startedAt = ${ttl} ms, want ≈ 90000`)
    const r = await sbx.commands.run('echo -n $SBX_LEVEL')
    assert.equal(r.stdout, 'from-create')
    assert.equal(await sbx.isRunning(), true)
  } finally {
    await kill(sbx)
  }
})

test('kill: connect and getInfo then fail with NotFound', T, async () => {
  const sbx = await create()
  const id = sbx.sandboxId
  const t0 = performance.now()
  assert.equal(await kill(sbx), true)
  console.log(`killed ${id} in ${ms(t0)}`)
  await assert.rejects(Sandbox.getInfo(id), (e) => {
    assert.ok(e instanceof NotFoundError, `getInfo: ${e?.constructor?.name}: ${e?.message}`)
    return true
  })
  await assert.rejects(Sandbox.connect(id), (e) => {
    assert.ok(e instanceof NotFoundError, `connect: ${e?.constructor?.name}: ${e?.message}`)
    return true
  })
  assert.equal(await Sandbox.kill(id), false, 'second kill reports not found')
  // The data plane answers for a gone sandbox with 502 (E2B's proxy contract).
  const res = await fetch(`${SANDBOX_URL}/health`, {
    headers: { 'E2b-Sandbox-Id': id, 'E2b-Sandbox-Port': '49983' },
  })
  assert.equal(res.status, 502, `data plane for a killed sandbox: ${res.status} ${await res.text()}`)
})

test('kill ends the open data-plane streams of the sandbox', T, async () => {
  const sbx = await create()
  const h = await sbx.commands.run('sleep 600', { background: true })
  const watched = []
  const watch = await sbx.files.watchDir('/home/user', (e) => { watched.push(e) })
  const t0 = performance.now()
  await kill(sbx)
  const settled = await Promise.race([
    h.wait().then((r) => `resolved ${JSON.stringify(r)}`, (e) => `rejected ${e?.constructor?.name}: ${e?.message}`),
    sleep(10_000).then(() => null),
  ])
  console.log(`command stream after kill: ${settled ?? 'still open after 10 s'} (${ms(t0)})`)
  // Let the client give up on what the daemon left open, so the file ends promptly.
  await h.disconnect().catch(() => {})
  await watch.stop().catch(() => {})
  assert.ok(settled, 'a command stream of a killed sandbox was still open 10 s after the kill')
})

test('control API errors: bad API key, unknown template', T, async () => {
  const badKey = { apiKey: 'e2b_' + '0'.repeat(40) }
  await assert.rejects(Sandbox.create('base', badKey), (e) => {
    assert.ok(e instanceof AuthenticationError, `create with a bad key: ${e?.constructor?.name}: ${e?.message}`)
    return true
  })
  await assert.rejects(Sandbox.list(badKey).nextItems(), AuthenticationError)
  await assert.rejects(Sandbox.create('no-such-template-e2e'), (e) => {
    assert.equal(e.statusCode, 404, `create from an unknown template: ${e?.constructor?.name} ${e?.statusCode}: ${e?.message}`)
    return true
  })
})

test('getMetrics reports sane values', T, async () => {
  const sbx = await create()
  try {
    const info = await sbx.getInfo()
    const check = (m, when) => {
      assert.ok(Array.isArray(m) && m.length > 0, `${when}: metrics ${JSON.stringify(m)}`)
      const last = m[m.length - 1]
      console.log(`${when}: ${JSON.stringify(last)}`)
      assert.equal(last.cpuCount, info.cpuCount, `${when}: cpuCount`)
      assert.ok(last.cpuUsedPct >= 0 && last.cpuUsedPct <= 100, `${when}: cpuUsedPct ${last.cpuUsedPct} outside [0, 100]`)
      assert.ok(last.memUsed > 0 && last.memUsed <= last.memTotal, `${when}: memUsed ${last.memUsed} / memTotal ${last.memTotal}`)
    }
    check(await sbx.getMetrics(), 'right after create')
    await sbx.commands.run('timeout 1 sh -c "while :; do :; done" || true')
    check(await sbx.getMetrics(), 'after 1 s of busy loop')
  } finally {
    await kill(sbx)
  }
})

test('setTimeout moves endAt (extend and shorten)', T, async () => {
  const sbx = await create({ timeoutMs: 60_000 })
  try {
    let t = Date.now()
    await sbx.setTimeout(600_000)
    let info = await sbx.getInfo()
    let want = t + 600_000
    assert.ok(Math.abs(info.endAt.getTime() - want) <= 3_000, `after setTimeout(600s): endAt ${info.endAt.toISOString()}, want ≈ ${new Date(want).toISOString()}`)
    t = Date.now()
    await sbx.setTimeout(30_000)
    info = await sbx.getInfo()
    want = t + 30_000
    assert.ok(Math.abs(info.endAt.getTime() - want) <= 3_000, `after setTimeout(30s): endAt ${info.endAt.toISOString()}, want ≈ ${new Date(want).toISOString()}`)
    assert.equal(info.state, 'running')
  } finally {
    await kill(sbx)
  }
})

test('Sandbox.list: metadata filter, state, paging with limit 2', T, async () => {
  const tag = `list-${randomBytes(6).toString('hex')}`
  const mine = []
  for (let i = 0; i < 3; i++) mine.push(await create({ metadata: { e2eTag: tag, i: String(i) } }))
  const other = await create({ metadata: { e2eTag: `${tag}-other` } })
  try {
    const paginator = Sandbox.list({ query: { metadata: { e2eTag: tag }, state: ['running'] }, limit: 2 })
    const pages = []
    while (paginator.hasNext) {
      const items = await paginator.nextItems()
      pages.push(items)
      assert.ok(pages.length <= 5, 'paging does not end')
    }
    console.log(`pages: ${pages.map((p) => p.length).join(', ')}`)
    assert.ok(pages.length >= 2, `3 sandboxes with limit 2 came in ${pages.length} page(s)`)
    assert.equal(pages[0].length, 2, 'the first page is full')
    const all = pages.flat()
    for (const s of all) {
      assert.equal(s.metadata.e2eTag, tag, `listed ${s.sandboxId} with metadata ${JSON.stringify(s.metadata)}`)
      assert.equal(s.state, 'running')
      assert.ok(s.endAt instanceof Date && !isNaN(s.endAt))
    }
    const ids = all.map((s) => s.sandboxId).sort()
    assert.deepEqual(ids, mine.map((s) => s.sandboxId).sort(), 'each tagged sandbox exactly once')
    assert.ok(!ids.includes(other.sandboxId), 'the differently tagged sandbox is excluded')

    // A filter that matches nothing gives an empty last page.
    const none = Sandbox.list({ query: { metadata: { e2eTag: `${tag}-nobody` } } })
    assert.deepEqual(await none.nextItems(), [])
    assert.equal(none.hasNext, false)
  } finally {
    for (const s of [...mine, other]) await kill(s)
  }
})

test('timeout: a sandbox with timeoutMs 2000 is gone at most 2 s after its deadline', T, async () => {
  const t0 = Date.now()
  const sbx = await create({ timeoutMs: 2_000 })
  const id = sbx.sandboxId
  const info = await sbx.getInfo()
  const deadline = info.endAt.getTime()
  console.log(`created at +${Date.now() - t0} ms, endAt at +${deadline - t0} ms`)
  assert.ok(deadline - t0 <= 2_000 + 1_500, `endAt ${deadline - t0} ms after the create call, want ≈ 2000`)
  let goneAt
  for (;;) {
    const now = Date.now()
    try {
      await Sandbox.getInfo(id)
    } catch (e) {
      assert.ok(e instanceof NotFoundError, `getInfo while expiring: ${e?.constructor?.name}: ${e?.message}`)
      goneAt = now
      break
    }
    assert.ok(now - deadline <= 10_000, 'still there 10 s after its deadline')
    await sleep(50)
  }
  created.delete(id)
  console.log(`gone at +${goneAt - t0} ms: ${goneAt - deadline} ms after endAt`)
  assert.ok(goneAt - deadline <= 2_000, `gone ${goneAt - deadline} ms after its deadline, want ≤ 2000`)
  assert.ok(goneAt >= deadline - 1_000, `gone ${deadline - goneAt} ms before its deadline`)
  const listed = await Sandbox.list({ query: { state: ['running', 'paused'] } }).nextItems()
  assert.ok(!listed.some((s) => s.sandboxId === id), 'an expired sandbox is not listed')
})

// ---------------------------------------------------------------- commands

test('commands.run: stdout, stderr, exit codes', T, async () => {
  const sbx = await create()
  try {
    let t0 = performance.now()
    const r = await sbx.commands.run('echo out; echo err >&2')
    console.log(`first command in ${ms(t0)}`)
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'out\n')
    assert.equal(r.stderr, 'err\n')

    t0 = performance.now()
    await sbx.commands.run('true')
    console.log(`second command in ${ms(t0)}`)

    await assert.rejects(sbx.commands.run('echo partial; echo bad >&2; exit 3'), (e) => {
      assert.ok(e instanceof CommandExitError, `${e?.constructor?.name}: ${e?.message}`)
      assert.equal(e.exitCode, 3)
      assert.equal(e.stdout, 'partial\n')
      assert.equal(e.stderr, 'bad\n')
      return true
    })
    await assert.rejects(sbx.commands.run('no-such-command-xyz'), (e) => {
      assert.ok(e instanceof CommandExitError)
      assert.equal(e.exitCode, 127)
      return true
    })

    const chunks = []
    const big = await sbx.commands.run('seq 1 20000', { onStdout: (d) => chunks.push(d) })
    const lines = big.stdout.trimEnd().split('\n')
    assert.equal(lines.length, 20000)
    assert.equal(lines[19999], '20000')
    assert.equal(chunks.join(''), big.stdout, 'onStdout saw the same bytes')
  } finally {
    await kill(sbx)
  }
})

test('commands.run: envs (per call and sandbox-level) and cwd', T, async () => {
  const sbx = await create({ envs: { SBX_A: 'sandbox-a', SBX_B: 'sandbox-b' } })
  try {
    let r = await sbx.commands.run('echo "$SBX_A|$SBX_B|$CALL_C"', { envs: { SBX_B: 'call-b', CALL_C: 'call-c' } })
    assert.equal(r.stdout, 'sandbox-a|call-b|call-c\n', 'per-call envs add to and override the sandbox ones')
    r = await sbx.commands.run('echo "$SBX_A|$SBX_B|$CALL_C"')
    assert.equal(r.stdout, 'sandbox-a|sandbox-b|\n', 'per-call envs do not leak into later calls')

    r = await sbx.commands.run('pwd')
    assert.equal(r.stdout, '/home/user\n', 'default cwd is the home of user')
    await sbx.files.makeDir('/tmp/e2e-cwd')
    r = await sbx.commands.run('pwd', { cwd: '/tmp/e2e-cwd' })
    assert.equal(r.stdout, '/tmp/e2e-cwd\n')
    await assert.rejects(sbx.commands.run('pwd', { cwd: '/no/such/dir' }))
  } finally {
    await kill(sbx)
  }
})

test('commands: default user is `user`, root on request, sudo works', T, async () => {
  const sbx = await create()
  try {
    assert.equal((await sbx.commands.run('whoami')).stdout, 'user\n')
    assert.equal((await sbx.commands.run('id -u')).stdout, '1000\n')
    assert.equal((await sbx.commands.run('whoami', { user: 'root' })).stdout, 'root\n')
    assert.equal((await sbx.commands.run('sudo -n whoami')).stdout, 'root\n')
    assert.equal((await sbx.commands.run('echo $HOME')).stdout, '/home/user\n')
    // The agent remembers accounts while /etc/passwd and /etc/group are
    // unchanged: a user added after a lookup failed is found at once.
    await assert.rejects(sbx.commands.run('whoami', { user: 'alice' }), /unknown user "alice"/)
    await sbx.commands.run('useradd -m alice', { user: 'root' })
    assert.equal((await sbx.commands.run('whoami; echo $HOME', { user: 'alice' })).stdout, 'alice\n/home/alice\n')
    assert.equal((await sbx.files.write('f', 'x', { user: 'alice' })).path, '/home/alice/f')
  } finally {
    await kill(sbx)
  }
})

test('commands: background command, list, kill', T, async () => {
  const sbx = await create()
  try {
    const h = await sbx.commands.run('sleep 600', { background: true })
    assert.ok(Number.isInteger(h.pid) && h.pid > 0, `pid ${h.pid}`)
    const procs = await sbx.commands.list()
    const p = procs.find((x) => x.pid === h.pid)
    assert.ok(p, `pid ${h.pid} not in commands.list(): ${JSON.stringify(procs)}`)
    assert.ok(`${p.cmd} ${p.args.join(' ')}`.includes('sleep 600'), `listed as ${JSON.stringify(p)}`)

    const t0 = performance.now()
    assert.equal(await h.kill(), true)
    const settled = await Promise.race([
      h.wait().then((r) => ({ r }), (e) => ({ e })),
      sleep(10_000).then(() => null),
    ])
    assert.ok(settled, 'wait() did not settle within 10 s of kill')
    console.log(`killed background command in ${ms(t0)}: ${settled.e ? settled.e.message : JSON.stringify(settled.r)}`)
    if (settled.e) assert.ok(settled.e instanceof CommandExitError, `${settled.e.constructor.name}: ${settled.e.message}`)
    await waitFor('the killed command to leave commands.list()', async () =>
      !(await sbx.commands.list()).some((x) => x.pid === h.pid))
    assert.equal(await sbx.commands.kill(h.pid), false, 'killing a gone pid reports false')

    // Output of a background command streams through the handle.
    const seen = []
    const h2 = await sbx.commands.run('for i in 1 2 3; do echo tick$i; sleep 0.2; done', {
      background: true,
      onStdout: (d) => seen.push(d),
    })
    const r2 = await h2.wait()
    assert.equal(r2.exitCode, 0)
    assert.equal(r2.stdout, 'tick1\ntick2\ntick3\n')
    assert.equal(seen.join(''), 'tick1\ntick2\ntick3\n')
  } finally {
    await kill(sbx)
  }
})

test('commands: stdin (sendStdin, closeStdin)', T, async () => {
  const sbx = await create()
  try {
    let out = ''
    const h = await sbx.commands.run('cat', { background: true, stdin: true, onStdout: (d) => { out += d } })
    await sbx.commands.sendStdin(h.pid, 'hi\n')
    await waitFor('cat to echo "hi"', () => out.includes('hi\n'))
    await h.sendStdin(new TextEncoder().encode('there\n'))
    await waitFor('cat to echo "there"', () => out.includes('there\n'))
    assert.equal(sbx.commands.supportsStdinClose, true, 'envd version supports closeStdin')
    await sbx.commands.closeStdin(h.pid)
    const r = await Promise.race([h.wait(), sleep(10_000).then(() => assert.fail('cat did not exit after closeStdin'))])
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'hi\nthere\n')

    // Without stdin: true the command's stdin is closed (cat ends at once).
    const r2 = await sbx.commands.run('cat; echo done')
    assert.equal(r2.stdout, 'done\n')
  } finally {
    await kill(sbx)
  }
})

test('pty: create, input echoed, resize, kill', T, async () => {
  const sbx = await create()
  try {
    let out = ''
    const dec = new TextDecoder()
    const t0 = performance.now()
    const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d, { stream: true }) } })
    assert.ok(h.pid > 0)
    const enc = new TextEncoder()
    await sbx.pty.sendInput(h.pid, enc.encode('echo pty-$((6*7))\n'))
    await waitFor('pty output "pty-42"', () => out.includes('pty-42'))
    console.log(`pty round trip in ${ms(t0)}`)
    assert.ok(out.includes('echo pty-$((6*7))'), `the terminal echoes the typed line: ${JSON.stringify(out)}`)

    await sbx.pty.sendInput(h.pid, enc.encode('stty size\n'))
    await waitFor('stty size = 24 80', () => out.includes('24 80'))
    await sbx.pty.resize(h.pid, { cols: 120, rows: 40 })
    await sbx.pty.sendInput(h.pid, enc.encode('stty size\n'))
    await waitFor('stty size = 40 120 after resize', () => out.includes('40 120'))

    const procs = await sbx.commands.list()
    assert.ok(procs.some((p) => p.pid === h.pid), 'the pty is listed')
    assert.equal(await sbx.pty.kill(h.pid), true)
    const settled = await Promise.race([h.wait().then(() => 'ok', () => 'err'), sleep(10_000).then(() => null)])
    assert.ok(settled, 'pty wait() did not settle within 10 s of kill')
    await waitFor('the killed pty to leave commands.list()', async () =>
      !(await sbx.commands.list()).some((x) => x.pid === h.pid))
  } finally {
    await kill(sbx)
  }
})

// ---------------------------------------------------------------- files

test('files: write, read, list, exists, rename, makeDir, remove', T, async () => {
  const sbx = await create()
  try {
    const w = await sbx.files.write('/home/user/e2e/a.txt', 'hello forkbox\n')
    assert.equal(w.path, '/home/user/e2e/a.txt')
    assert.equal(await sbx.files.read('/home/user/e2e/a.txt'), 'hello forkbox\n')
    assert.equal(await sbx.files.read('e2e/a.txt'), 'hello forkbox\n', 'relative paths resolve against /home/user')
    assert.equal((await sbx.commands.run('cat /home/user/e2e/a.txt')).stdout, 'hello forkbox\n')
    assert.equal((await sbx.commands.run('stat -c %U /home/user/e2e/a.txt')).stdout, 'user\n', 'written as user')

    assert.equal(await sbx.files.makeDir('/home/user/e2e/sub/deeper'), true)
    assert.equal(await sbx.files.makeDir('/home/user/e2e/sub/deeper'), false, 'makeDir of an existing dir')
    await sbx.files.write('/home/user/e2e/sub/b.txt', 'b')

    const entries = await sbx.files.list('/home/user/e2e')
    const byName = Object.fromEntries(entries.map((e) => [e.name, e]))
    assert.deepEqual(Object.keys(byName).sort(), ['a.txt', 'sub'])
    assert.equal(byName['a.txt'].type, 'file')
    assert.equal(byName['a.txt'].path, '/home/user/e2e/a.txt')
    assert.equal(byName['a.txt'].size, 14)
    assert.equal(byName.sub.type, 'dir')
    const deep = await sbx.files.list('/home/user/e2e', { depth: 2 })
    assert.ok(deep.some((e) => e.path === '/home/user/e2e/sub/b.txt'), 'depth 2 lists sub/b.txt')

    assert.equal(await sbx.files.exists('/home/user/e2e/a.txt'), true)
    assert.equal(await sbx.files.exists('/home/user/e2e/nope'), false)
    const info = await sbx.files.getInfo('/home/user/e2e/a.txt')
    assert.equal(info.size, 14)

    const moved = await sbx.files.rename('/home/user/e2e/a.txt', '/home/user/e2e/c.txt')
    assert.equal(moved.path, '/home/user/e2e/c.txt')
    assert.equal(await sbx.files.exists('/home/user/e2e/a.txt'), false)
    assert.equal(await sbx.files.read('/home/user/e2e/c.txt'), 'hello forkbox\n')

    await sbx.files.remove('/home/user/e2e/c.txt')
    assert.equal(await sbx.files.exists('/home/user/e2e/c.txt'), false)
    await sbx.files.remove('/home/user/e2e/sub')
    assert.equal(await sbx.files.exists('/home/user/e2e/sub/b.txt'), false, 'remove of a dir is recursive')

    await assert.rejects(sbx.files.read('/home/user/e2e/missing.txt'), (e) => {
      assert.ok(e instanceof FileNotFoundError || e instanceof NotFoundError, `${e?.constructor?.name}: ${e?.message}`)
      return true
    })

    // Multi-file write.
    const many = await sbx.files.write([
      { path: '/tmp/m1', data: 'one' },
      { path: '/tmp/m2', data: 'two' },
    ])
    assert.equal(many.length, 2)
    assert.equal((await sbx.commands.run('cat /tmp/m1 /tmp/m2')).stdout, 'onetwo')
  } finally {
    await kill(sbx)
  }
})

test('files.watchDir reports a file written afterwards', T, async () => {
  const sbx = await create()
  try {
    await sbx.files.makeDir('/home/user/watched')
    const events = []
    const handle = await sbx.files.watchDir('/home/user/watched', (ev) => { events.push(ev) })
    try {
      const t0 = performance.now()
      await sbx.files.write('/home/user/watched/new.txt', 'x')
      await waitFor('a watch event for new.txt', () => events.some((e) => e.name === 'new.txt'))
      console.log(`watch event after ${ms(t0)}: ${JSON.stringify(events)}`)
      const types = new Set(events.filter((e) => e.name === 'new.txt').map((e) => e.type))
      assert.ok(types.has('create') || types.has('write'), `event types ${[...types]}`)

      await sbx.commands.run('rm /home/user/watched/new.txt')
      await waitFor('a remove event for new.txt', () => events.some((e) => e.name === 'new.txt' && e.type === 'remove'))
    } finally {
      await handle.stop()
    }
    await assert.rejects(sbx.files.watchDir('/home/user/not-there', () => {}))
  } finally {
    await kill(sbx)
  }
})

test('files: 1 MiB binary upload/download is byte-identical (bytes, blob, stream)', T, async () => {
  const sbx = await create()
  try {
    const data = randomBytes(1 << 20)
    const sha = createHash('sha256').update(data).digest('hex')
    const ab = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength)

    let t0 = performance.now()
    await sbx.files.write('/home/user/blob.bin', ab)
    console.log(`upload 1 MiB (ArrayBuffer) in ${ms(t0)}`)
    assert.equal((await sbx.commands.run('sha256sum /home/user/blob.bin')).stdout.split(' ')[0], sha)

    t0 = performance.now()
    const bytes = await sbx.files.read('/home/user/blob.bin', { format: 'bytes' })
    console.log(`download 1 MiB (bytes) in ${ms(t0)}`)
    assert.ok(bytes instanceof Uint8Array)
    assert.equal(bytes.length, data.length)
    assert.ok(Buffer.from(bytes).equals(data), 'bytes differ')

    const blob = await sbx.files.read('/home/user/blob.bin', { format: 'blob' })
    assert.ok(Buffer.from(await blob.arrayBuffer()).equals(data), 'blob differs')

    const stream = await sbx.files.read('/home/user/blob.bin', { format: 'stream' })
    const parts = []
    for await (const chunk of stream) parts.push(Buffer.from(chunk))
    assert.ok(Buffer.concat(parts).equals(data), 'stream differs')

    // Upload as a Blob too, with every byte value present.
    const all = Buffer.alloc(256 * 4096)
    for (let i = 0; i < all.length; i++) all[i] = i % 256
    await sbx.files.write('/tmp/allbytes.bin', new Blob([all]))
    const back = await sbx.files.read('/tmp/allbytes.bin', { format: 'bytes' })
    assert.ok(Buffer.from(back).equals(all), 'Blob upload differs')
  } finally {
    await kill(sbx)
  }
})

// ---------------------------------------------------------------- access token

test('secure sandbox: SDK works with its token; raw data-plane calls without it get 401', T, async () => {
  const sbx = await create({ secure: true })
  try {
    assert.equal((await sbx.commands.run('echo secured')).stdout, 'secured\n')
    await sbx.files.write('/home/user/secret.txt', 'token-protected')
    const token = sbx.envdAccessToken
    assert.ok(token, 'create returned an envdAccessToken')
    const route = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' }
    const list = (headers) => fetch(`${SANDBOX_URL}/process.Process/List`, {
      method: 'POST',
      headers: { ...route, 'Content-Type': 'application/json', ...headers },
      body: '{}',
    })
    const file = (headers) => fetch(`${SANDBOX_URL}/files?path=/home/user/secret.txt&username=user`, { headers: { ...route, ...headers } })

    let res = await list({})
    assert.equal(res.status, 401, `process.List without X-Access-Token: ${res.status} ${await res.text()}`)
    res = await list({ 'X-Access-Token': 'wrong' + token })
    assert.equal(res.status, 401, `process.List with a wrong token: ${res.status} ${await res.text()}`)
    res = await file({})
    assert.equal(res.status, 401, `GET /files without X-Access-Token: ${res.status} ${await res.text()}`)

    res = await list({ 'X-Access-Token': token })
    assert.equal(res.status, 200, `process.List with the token: ${res.status} ${await res.text()}`)
    res = await file({ 'X-Access-Token': token })
    assert.equal(res.status, 200)
    assert.equal(await res.text(), 'token-protected')
  } finally {
    await kill(sbx)
  }
})

// ---------------------------------------------------------------- isolation

test('isolation: only the sandbox processes are visible', T, async () => {
  const sbx = await create()
  try {
    const ps = (await run(sbx, 'ps -eo pid,user,args')).stdout
    const cmdlines = (await run(sbx, 'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < $f; echo; done', { user: 'root' })).stdout
    const pids = (await run(sbx, 'ls /proc | grep -c "^[0-9]"')).stdout.trim()
    console.log(`processes inside (${pids}):\n${ps}`)
    assert.ok(Number(pids) < 30, `${pids} processes visible inside a fresh sandbox`)
    for (const bad of ['forkbox serve', 'runsc', 'node --test', '--test-concurrency', 'containerd', 'sshd']) {
      assert.ok(!ps.includes(bad) && !cmdlines.includes(bad), `host process "${bad}" visible inside:\n${ps}`)
    }
    assert.ok(!(await run(sbx, `test -e /proc/${process.pid}/cmdline && tr "\\0" " " < /proc/${process.pid}/cmdline`)).stdout.includes('node'),
      'the host node process is visible by pid')
  } finally {
    await kill(sbx)
  }
})

test('isolation: a host file is not visible inside', T, async () => {
  const name = `/tmp/forkbox-e2e-secret-${randomBytes(8).toString('hex')}`
  writeFileSync(name, 'host secret\n')
  const sbx = await create()
  try {
    const r = await run(sbx, `test -e ${name} && echo VISIBLE || echo absent; ls /tmp`, { user: 'root' })
    assert.ok(r.stdout.startsWith('absent'), `host file ${name} visible inside:\n${r.stdout}`)
    const found = await run(sbx, `grep -rl "host secret" /tmp /var/tmp 2>/dev/null | head -1`, { user: 'root' })
    assert.equal(found.stdout, '', 'host secret found inside')
  } finally {
    rmSync(name, { force: true })
    await kill(sbx)
  }
})

test('isolation: the daemon port is unreachable from inside', T, async () => {
  const port = new URL(API_URL).port
  const hostHealth = await (await fetch(`${API_URL}/health`)).text()
  const sbx = await create()
  try {
    const route = (await run(sbx, 'ip route')).stdout
    const m = /default via (\d+\.\d+\.\d+\.\d+)/.exec(route)
    assert.ok(m, `no default route inside:\n${route}`)
    const gw = m[1]
    console.log(`sandbox default gateway ${gw}, daemon port ${port}`)
    let t0 = performance.now()
    const viaGw = await run(sbx, `curl -sS -m 3 http://${gw}:${port}/health`)
    console.log(`curl gateway:${port} → exit ${viaGw.exitCode} in ${ms(t0)}: ${viaGw.stdout}${viaGw.stderr}`)
    assert.notEqual(viaGw.exitCode, 0, `the daemon answered on ${gw}:${port} from inside: ${viaGw.stdout}`)
    // Other host addresses: the agent port via the gateway isn't the host's either.
    const hostAgent = await run(sbx, `curl -sS -m 3 http://${gw}:49983/health`)
    assert.notEqual(hostAgent.exitCode, 0, `something answered on ${gw}:49983: ${hostAgent.stdout}`)

    t0 = performance.now()
    const lo = await run(sbx, `curl -sS -m 3 http://127.0.0.1:${port}/health`)
    console.log(`curl 127.0.0.1:${port} → exit ${lo.exitCode} in ${ms(t0)}`)
    assert.ok(lo.exitCode !== 0 || lo.stdout !== hostHealth, `127.0.0.1:${port} inside is the daemon: ${lo.stdout}`)
  } finally {
    await kill(sbx)
  }
})

test('isolation: another sandbox is unreachable', T, async () => {
  const a = await create()
  const b = await create()
  try {
    const ipA = ipv4Of((await run(a, 'ip -4 addr show eth0')).stdout)
    const ipB = ipv4Of((await run(b, 'ip -4 addr show eth0')).stdout)
    console.log(`sandbox A ${ipA}, sandbox B ${ipB}`)
    assert.notEqual(ipA, ipB)
    // A server in B, reachable from B itself (the positive control).
    const server = await b.commands.run(`python3 -m http.server 8000 --bind 0.0.0.0 --directory /tmp`, { background: true })
    await waitFor('the server in B', async () => (await run(b, `curl -sS -m 2 -o /dev/null http://${ipB}:8000/`)).exitCode === 0, 15_000, 200)
    const t0 = performance.now()
    const r = await run(a, `curl -sS -m 3 -o /dev/null http://${ipB}:8000/`)
    console.log(`A → B:8000: exit ${r.exitCode} in ${ms(t0)} ${r.stderr}`)
    assert.notEqual(r.exitCode, 0, `sandbox A reached sandbox B at ${ipB}:8000`)
    const envd = await run(a, `curl -sS -m 3 http://${ipB}:49983/health`)
    assert.notEqual(envd.exitCode, 0, `sandbox A reached B's agent at ${ipB}:49983`)
    await server.kill()
  } finally {
    await kill(a)
    await kill(b)
  }
})

// ---------------------------------------------------------------- data plane extras

test('Sandbox.connect to a running sandbox: usable, extends but never shortens the TTL', T, async () => {
  const sbx = await create({ timeoutMs: 120_000 })
  try {
    const before = (await sbx.getInfo()).endAt.getTime()
    const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 10_000 })
    assert.equal(again.sandboxId, sbx.sandboxId)
    assert.equal((await again.commands.run('echo connected')).stdout, 'connected\n')
    let info = await sbx.getInfo()
    assert.ok(info.endAt.getTime() >= before - 1_000, `connect with a shorter timeout moved endAt from ${new Date(before).toISOString()} to ${info.endAt.toISOString()}`)
    const t = Date.now()
    await Sandbox.connect(sbx.sandboxId, { timeoutMs: 600_000 })
    info = await sbx.getInfo()
    assert.ok(Math.abs(info.endAt.getTime() - (t + 600_000)) <= 3_000, `connect(600 s): endAt ${info.endAt.toISOString()}`)
  } finally {
    await kill(sbx)
  }
})

test('commands.connect reattaches to a running background command', T, async () => {
  const sbx = await create()
  try {
    const h = await sbx.commands.run('for i in $(seq 1 30); do echo line$i; sleep 0.1; done', { background: true })
    await sleep(300)
    await h.disconnect()
    let seen = ''
    const h2 = await sbx.commands.connect(h.pid, { onStdout: (d) => { seen += d } })
    const r = await h2.wait()
    assert.equal(r.exitCode, 0)
    assert.ok(seen.includes('line30\n'), `reattached stream ends with line30: ${JSON.stringify(seen.slice(-40))}`)
    await assert.rejects(sbx.commands.connect(999_999))
  } finally {
    await kill(sbx)
  }
})

test('data plane forwards any listening port (E2b-Sandbox-Port)', T, async () => {
  const sbx = await create()
  try {
    assert.equal(sbx.getHost(8000), `8000-${sbx.sandboxId}.${sbx.sandboxDomain}`)
    await sbx.files.write('/home/user/www/hello.txt', 'served from the sandbox')
    const server = await sbx.commands.run('python3 -m http.server 8000 --bind 0.0.0.0 --directory /home/user/www', { background: true })
    const headers = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8000' }
    if (sbx.trafficAccessToken) headers['E2b-Traffic-Access-Token'] = sbx.trafficAccessToken
    const t0 = performance.now()
    const body = await waitFor('the sandbox server through the proxy', async () => {
      const res = await fetch(`${SANDBOX_URL}/hello.txt`, { headers }).catch(() => null)
      return res && res.status === 200 ? res.text() : null
    }, 15_000, 200)
    console.log(`port 8000 answered through the proxy after ${ms(t0)}`)
    assert.equal(body, 'served from the sandbox')
    // A port nobody listens on answers an error, not a hang.
    const res = await fetch(`${SANDBOX_URL}/`, { headers: { ...headers, 'E2b-Sandbox-Port': '8001' }, signal: AbortSignal.timeout(10_000) })
    assert.ok(res.status >= 500, `closed port: ${res.status}`)
    await server.kill()
  } finally {
    await kill(sbx)
  }
})

test('signed file URLs: download and upload without the access token header', T, async () => {
  const sbx = await create({ secure: true })
  try {
    assert.ok(sbx.envdAccessToken, 'create returned an envdAccessToken')
    await sbx.files.write('/home/user/signed.txt', 'signed content')
    const route = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' }

    const url = await sbx.downloadUrl('/home/user/signed.txt')
    assert.match(url, /signature=/)
    let res = await fetch(url, { headers: route })
    assert.equal(res.status, 200, `signed download: ${res.status} ${await res.clone().text()}`)
    assert.equal(await res.text(), 'signed content')

    const bad = new URL(url)
    bad.searchParams.set('signature', 'v1_' + 'A'.repeat(43))
    res = await fetch(bad, { headers: route })
    assert.ok(res.status === 401 || res.status === 403, `forged signature: ${res.status}`)
    const other = new URL(url)
    other.searchParams.set('path', '/etc/shadow')
    res = await fetch(other, { headers: route })
    assert.ok(res.status === 401 || res.status === 403, `signature of another path: ${res.status}`)
    const expired = await sbx.downloadUrl('/home/user/signed.txt', { useSignatureExpiration: -60 })
    res = await fetch(expired, { headers: route })
    assert.ok(res.status === 401 || res.status === 403, `expired signature: ${res.status}`)
    const fresh = await sbx.downloadUrl('/home/user/signed.txt', { useSignatureExpiration: 120 })
    res = await fetch(fresh, { headers: route })
    assert.equal(res.status, 200, `signature with a future expiration: ${res.status}`)

    const up = await sbx.uploadUrl('/home/user/uploaded.txt')
    const form = new FormData()
    form.append('file', new Blob(['uploaded via signed url']), 'uploaded.txt')
    res = await fetch(up, { method: 'POST', body: form, headers: route })
    assert.equal(res.status, 200, `signed upload: ${res.status} ${await res.text()}`)
    assert.equal(await sbx.files.read('/home/user/uploaded.txt'), 'uploaded via signed url')
  } finally {
    await kill(sbx)
  }
})
