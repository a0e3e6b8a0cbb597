// Package badimport plants a forbidden import for deptest's own test: a
// server-like package reaching the gVisor backend directly.
package badimport

import _ "github.com/forkbox/forkbox/internal/runtime/gvisor"
