package agent

import (
	"os"
	"strconv"
	"syscall"
)

// CloseInheritedOnExec marks every descriptor above stderr that the agent
// inherited close-on-exec, so the commands it starts get exactly their
// stdio (and a pooled shell exactly its control pipes), not whatever its
// own parent leaked: a fresh `bash -l -c` and a pooled shell then see the
// same descriptors whatever started the agent. The agent's own files are
// close-on-exec already (Go opens them so).
func CloseInheritedOnExec() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
