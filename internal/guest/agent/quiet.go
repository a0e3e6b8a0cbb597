package agent

import (
	"os"
	"strconv"
)

// Quiet reports whether no process exists in the sandbox but the agent and
// its idle pooled shells, each blocked reading the command it waits for:
// until the agent starts a process (Config.Started), nothing in the
// sandbox can take more memory, and the OOM guard need not look.
func (a *Agent) Quiet() bool {
	return quietProcs("/proc", os.Getpid(), a.shells.idlePIDs())
}

// quietProcs reports whether procDir lists no process but self and idle.
func quietProcs(procDir string, self int, idle map[int]bool) bool {
	ents, err := os.ReadDir(procDir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || idle[pid] {
			continue
		}
		return false
	}
	return true
}
