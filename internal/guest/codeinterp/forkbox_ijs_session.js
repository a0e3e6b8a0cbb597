// forkbox's addition to nel's session server (the Node.js process in which
// ijavascript runs cells), preloaded by forkbox_ijs_kernel.js: SIGINT
// interrupts the running cell and keeps the session's state.
//
// - A cell's synchronous code runs in vm.runInThisContext, here with
//   breakOnSigint, so SIGINT stops it there (an endless loop included) and
//   the cell fails with ERR_SCRIPT_EXECUTION_INTERRUPTED.
// - A cell waiting asynchronously (top-level await, $$.async()) has no code
//   running; an interrupt message from the kernel process (or a SIGINT)
//   ends it with an error through the current execution context ($$),
//   which nel puts in the global scope for each request. What it was
//   waiting for may still finish later; its result is dropped (nel sends
//   nothing for a context already done).
'use strict'

const vm = require('vm')

const runInThisContext = vm.runInThisContext
vm.runInThisContext = function forkboxRunInThisContext(code, options) {
  if (typeof options === 'string') options = { filename: options }
  return runInThisContext.call(this, code, { ...options, breakOnSigint: true })
}

// interruptWaiting ends the current cell if it waits; nel sends nothing
// for a cell that is over.
function interruptWaiting() {
  const ctx = global.$$
  if (ctx && typeof ctx.sendError === 'function') {
    const err = new Error('Execution interrupted')
    err.name = 'KeyboardInterrupt'
    ctx.sendError(err)
  }
}

// The kernel process asks first through the IPC channel (a message nel
// must not see: it would take it for a request).
const emit = process.emit
process.emit = function forkboxEmit(event, message, ...rest) {
  if (event === 'message' && message && message.forkboxInterrupt === true) {
    interruptWaiting()
    return true
  }
  return emit.call(this, event, message, ...rest)
}

// A SIGINT (a Jupyter client's signal interrupt) between scripts; while a
// script runs with breakOnSigint, Node calls no SIGINT listener.
process.on('SIGINT', interruptWaiting)
