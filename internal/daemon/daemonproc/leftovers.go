package daemonproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/forkbox/forkbox/internal/runtime/gvisor"
)

// killLeftovers kills the runsc processes still running under the stopped
// daemon's runsc root and returns an error naming their containers. After
// KillAll and SIGTERM a daemon should leave none (sandboxes it was told
// about are killed; its pool and standby containers are its own), but a
// pool refill that races the stop has been seen to leave one running: its
// test's temporary data dir is gone afterwards, so nothing else would ever
// remove it. The error is for the test log, so the leak stays visible.
func killLeftovers(dataDir string) error {
	procs := gvisor.RunscProcesses(filepath.Join(dataDir, "runtime", "runsc"))
	if len(procs) == 0 {
		return nil
	}
	var ids []string
	for pid, p := range procs {
		syscall.Kill(pid, syscall.SIGKILL)
		if !slices.Contains(ids, p.Container) {
			ids = append(ids, p.Container)
		}
	}
	slices.Sort(ids)
	removeNamespaces(ids)
	return fmt.Errorf("daemonproc: the stopped daemon left runsc containers %v running; killed them", ids)
}

// removeNamespaces deletes the network namespaces of containers ids
// (/var/run/netns/<prefix><id>, whatever the daemon's prefix): killing a
// sandbox's processes does not remove its namespace, and with it gone the
// namespace's veth pair goes too.
func removeNamespaces(ids []string) {
	ents, _ := os.ReadDir(netnsDir)
	for _, e := range ents {
		for _, id := range ids {
			if strings.HasSuffix(e.Name(), "-"+id) {
				exec.Command("ip", "netns", "del", e.Name()).Run()
			}
		}
	}
}

// netnsDir is where `ip netns` keeps its named namespaces.
const netnsDir = "/var/run/netns"
