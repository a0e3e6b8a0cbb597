package codeinterp

import "fmt"

// NoteOutOfMemory tells the server that the sandbox's out-of-memory guard
// is about to make a process of group pgid fail its allocations or kill it
// (oomguard.Options.Acting). A kernel of that group — the kernel itself,
// or for JavaScript its session process — that dies during the cell then
// reports the sandbox's memory as the cause.
func (s *Server) NoteOutOfMemory(pgid int) {
	for _, c := range s.list() {
		if k, ok := c.kernel().(*jupyterKernel); ok && k.p.pid == pgid {
			k.outOfMemory.Store(true)
		}
	}
}

// deathCause says why a kernel died, for its DeadKernelError.
func (k *jupyterKernel) deathCause() string {
	if k.outOfMemory.Load() {
		return fmt.Sprintf("the %s kernel died when the sandbox ran out of memory", k.spec.name)
	}
	return fmt.Sprintf("the %s kernel died", k.spec.name)
}
