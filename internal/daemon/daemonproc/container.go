package daemonproc

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// ContainerOf returns the runsc container id of sandbox id in a daemon's
// data dir: it names the sandbox's runsc processes, network namespace and
// cgroups. It is the sandbox id unless the sandbox was restored into a
// standby container created ahead under an id of its own.
func ContainerOf(dataDir, id string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "runtime", "sandboxes", id, "handle.json"))
	if err != nil {
		return "", fmt.Errorf("handle of %s: %w", id, err)
	}
	var h struct {
		Container string `json:"container"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return "", fmt.Errorf("handle of %s: %w", id, err)
	}
	if h.Container == "" {
		return id, nil
	}
	return h.Container, nil
}
