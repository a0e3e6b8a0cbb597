package agent

import (
	"os"
	"testing"
)

// TestMain starts the tests as the agent starts (cmd/forkbox-agent): with
// what its runner leaked (a lock's descriptor, an IDE's) closed on exec.
func TestMain(m *testing.M) {
	CloseInheritedOnExec()
	os.Exit(m.Run())
}
