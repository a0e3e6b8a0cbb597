// forkbox's additions to npm's ijavascript kernel process, loaded with
// `node --require` before ijavascript's kernel.js. ijavascript runs cells
// in a second Node.js process (nel's session server) and, out of the box,
// answers SIGINT by restarting that process, losing every variable. Here:
//
// - The kernel process ignores SIGINT and answers an interrupt_request
//   (below); the session process stops the cell (forkbox_ijs_session.js)
//   with its state kept.
// - A session process that ends without the kernel asking for it (killed
//   for memory, V8's heap limit, process.exit in a cell) ends the kernel
//   too. nel would mark the session dead and leave every request, the
//   running one included, unanswered for good; a kernel that exits is one
//   the code interpreter sees die and replaces on the next call.
'use strict'

const childProcess = require('child_process')
const fs = require('fs')
const path = require('path')

// nel as jp-kernel loads it, found from ijavascript's kernel.js (argv[1]).
const kernelDir = path.dirname(fs.realpathSync(process.argv[1]))
const jpKernel = require.resolve('jp-kernel', { paths: [kernelDir] })
const nelPath = require.resolve('nel', { paths: [path.dirname(jpKernel)] })

// nel keeps child_process.spawn from the moment it loads, so the wrapper
// goes in first.
let sessionArgs
const spawn = childProcess.spawn
childProcess.spawn = function forkboxSpawn(command, args, options) {
  if (args !== sessionArgs) return spawn.call(this, command, args, options)
  // The session's stderr, which nel discards, is kept for its last words
  // (V8's "JavaScript heap out of memory" when it aborts, say).
  const stdio = [...options.stdio]
  if (stdio[2] === 'ignore') stdio[2] = 'pipe'
  const child = spawn.call(this, command, args, { ...options, stdio })
  let last = ''
  if (child.stderr) child.stderr.on('data', (b) => { last = (last + b).slice(-16384) })
  // nel's Session#kill removes every listener before it kills the
  // process on purpose (restart, shutdown), so this fires only for an
  // unrequested end.
  child.on('exit', (code, signal) => {
    if (child.killed) return
    const how = signal ? 'was killed by ' + signal : 'exited with status ' + code
    // V8's fatal error line, not the native stack trace after it.
    const lines = last.trim().split('\n')
    const fatal = lines.filter((l) => l.includes('FATAL ERROR'))
    const words = (fatal.length > 0 ? fatal : lines.slice(-3)).join('\n')
    process.stderr.write('forkbox: the JavaScript session process ' + how + (words ? ': ' + words : '') + '\n')
    process.exit(1)
  })
  return child
}

// The session server starts with forkbox_ijs_session.js preloaded. nel
// spawns it with Session._args, read at every (re)start.
const { Session } = require(nelPath)
sessionArgs = ['--require', path.join(__dirname, 'forkbox_ijs_session.js'), ...Session._args]
Session._args = sessionArgs

// Interrupts come as an interrupt_request on the shell channel (the code
// interpreter's; jp-kernel reads only shutdown requests on control). A cell
// that waits (await, $$.async()) is ended through the session's IPC channel,
// which takes no signal. One whose code runs cannot read that channel:
// from 100 ms on, while (and only while) it is still the session's task,
// SIGINT goes to the kernel's process group — the session and what it
// started; this process ignores it — every 500 ms. Node loses a SIGINT
// that lands while a script's watchdog is being torn down and hands it to
// the next script run, so no signal is sent once the cell is over, nor to
// a cell that a message can stop.
const handlers = require(path.join(path.dirname(jpKernel), 'lib', 'handlers_v5.js'))
handlers.interrupt_request = function interruptRequest(request) {
  request.respond(this.shellSocket, 'interrupt_reply', { status: 'ok' })
  const session = this.session
  const task = session._currentTask
  if (!task || task.forkboxInterrupting) return
  task.forkboxInterrupting = true
  session._server.send({ forkboxInterrupt: true })
  let timer = null
  const interrupt = () => {
    if (session._currentTask !== task) return clearInterval(timer)
    try {
      process.kill(-process.pid, 'SIGINT')
    } catch {
      session._server.kill('SIGINT') // not a process group leader
    }
  }
  setTimeout(() => {
    interrupt()
    if (session._currentTask === task) timer = setInterval(interrupt, 500)
  }, 100)
}

// kernel.js installs its restart-on-SIGINT listener while it loads; signal
// listeners run from the event loop, so removing it before the loop's
// first turn leaves no window in which it could run.
const ignoreSIGINT = () => {}
process.on('SIGINT', ignoreSIGINT)
process.nextTick(() => {
  for (const l of process.listeners('SIGINT')) {
    if (l !== ignoreSIGINT) process.removeListener('SIGINT', l)
  }
})
