// The command pool (forkbox's agent keeps login shells started ahead of
// time for commands.run) seen through the unmodified npm `e2b` client: every
// command runs twice in one sandbox, once by a pooled shell and once fresh,
// and the two must agree output for output. A request with an extra env var
// is a configuration the pool was not started for, so it starts fresh; the
// tests drop that variable from what they compare. Run by
// test/e2e/e2e_test.go (TestE2BClient/commandpool).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError } from 'e2b'
import { sleep, waitFor, run } from './helpers.mjs'

const T = { timeout: 120_000 }
const FRESH = { envs: { FB_FRESH: '1' } }
const created = new Set()

after(async () => {
  for (const id of created) await Sandbox.kill(id).catch(() => {})
})

// A pooled shell's argv is the pool's wrapper, a fresh one's the command.
const probe = `echo "$(tr '\\0' ' ' </proc/$$/cmdline)"`

// pooled waits until the pool has a shell ready, then runs cmd in it.
async function pooled(sbx, cmd, opts = {}) {
  await waitFor('a pooled shell', async () => {
    await sleep(300)
    return (await sbx.commands.run(probe)).stdout.includes('__fb_')
  }, 60_000, 0)
  await sleep(300) // refilled after the probe
  return run(sbx, cmd, opts)
}

const scrub = (s) => s.split('\n').filter((l) => !l.startsWith('FB_FRESH=')).join('\n')
const outcome = (r) => ({ exitCode: r.exitCode, stdout: scrub(r.stdout), stderr: r.stderr })

test('pooled and fresh commands.run agree', T, async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000, envs: { FROM_CREATE: 'c' } })
  created.add(sbx.sandboxId)
  const fresh = await sbx.commands.run(probe, FRESH)
  assert.ok(!fresh.stdout.includes('__fb_'), `a request with its own env ran pooled: ${fresh.stdout}`)
  const cases = [
    'echo hi',
    'env | sort',
    'id; pwd; umask; echo "$0|$-|$SHLVL|$#|$?|$((SECONDS < 2))|$FROM_CREATE"; shopt login_shell',
    'ulimit -a; grep -E "^(Uid|Gid|Groups|Cap(Prm|Eff|Bnd)):" /proc/$$/status; :',
    'ls /proc/$$/fd; readlink /proc/$$/fd/0; :',
    'echo out; echo err >&2; exit 3',
    'echo before; kill -TERM $$; echo after',
  ]
  for (const cmd of cases) {
    const want = outcome(await run(sbx, cmd, FRESH))
    const got = outcome(await pooled(sbx, cmd))
    assert.deepEqual(got, want, `pooled and fresh differ for ${JSON.stringify(cmd)}`)
  }
})

test('a pooled command: pid, commands.kill, sendStdin, background', T, async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 })
  created.add(sbx.sandboxId)
  for (const opts of [FRESH, {}]) {
    const start = opts === FRESH ? (c, o) => sbx.commands.run(c, { ...o, ...FRESH }) : async (c, o) => {
      await pooled(sbx, 'true')
      await sleep(300)
      return sbx.commands.run(c, o)
    }
    // The pid the client got is the shell's $$, reported by the command.
    const loop = await start('echo "pid $$"; while :; do sleep 0.1; done', { background: true })
    await waitFor('the pid line', async () => loop.stdout.includes('pid '))
    assert.equal(loop.stdout.trim(), `pid ${loop.pid}`)
    assert.equal(await sbx.commands.kill(loop.pid), true)
    const killed = await loop.wait().catch((e) => e)
    assert.ok(killed instanceof CommandExitError, `killed command: ${killed}`)
    // sendStdin reaches the shell's stdin.
    const reader = await start('read -r line; echo "got $line"', { background: true, stdin: true })
    await sbx.commands.sendStdin(reader.pid, 'hello\n')
    const res = await reader.wait()
    assert.equal(res.stdout, 'got hello\n')
  }
  // A PTY is never pooled and still works.
  let out = ''
  const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += new TextDecoder().decode(d) } })
  await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo pty-$((6*7)); exit\n'))
  await term.wait().catch(() => {})
  assert.match(out, /pty-42/)
})

// The agent remembers the login profile's state until inotify reports a
// change in its directories. Each change here is made while a shell started
// before it waits in the pool (by files.write, or by a background command
// that sleeps past the pool's refill), so only that report keeps the next
// command from running with the old profile.
test('a profile changed while a pooled shell waits is seen by the next command', T, async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 })
  created.add(sbx.sandboxId)
  const vars = async () => (await sbx.commands.run('echo "[$FB_P][$FB_ETC]"')).stdout
  const inBackground = async (cmd, opts = {}) => {
    const h = await sbx.commands.run(`sleep 1; ${cmd}`, { ...opts, background: true })
    await h.wait()
  }
  await pooled(sbx, 'true')
  await sleep(500)
  assert.equal(await vars(), '[][]\n')
  await pooled(sbx, 'true')
  await sleep(500)
  await sbx.files.write('/home/user/.profile', 'export FB_P=written\n')
  assert.equal(await vars(), '[written][]\n', 'files.write')
  await pooled(sbx, 'true')
  await inBackground(`printf 'export FB_P=renamed\\n' >~/.p.new && mv ~/.p.new ~/.profile`)
  assert.equal(await vars(), '[renamed][]\n', 'replaced by a rename')
  await pooled(sbx, 'true')
  await inBackground('echo "export FB_ETC=etc" >/etc/profile.d/fb.sh', { user: 'root' })
  assert.equal(await vars(), '[renamed][etc]\n', 'a new file in /etc/profile.d')
  await pooled(sbx, 'true')
  await inBackground(`echo 'export FB_P=appended' >>~/.profile`)
  assert.equal(await vars(), '[appended][etc]\n', 'appended to')
})
