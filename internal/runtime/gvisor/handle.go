package gvisor

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// handleVersion is bumped when handle's meaning changes, so a newer daemon
// can tell (and migrate) handles an older one wrote.
const handleVersion = 1

// handle is what the runtime persists per sandbox next to its bundle so a
// restarted daemon can reattach: everything Info and Dial need that runsc
// does not know.
type handle struct {
	Version       int               `json:"version"`
	ID            string            `json:"id"`
	Slot          int               `json:"slot"`
	Addr          netip.Addr        `json:"addr"`
	RootFS        string            `json:"rootfs"`
	AllowInternet bool              `json:"allow_internet"`
	Resources     runtime.Resources `json:"resources"`
	CreatedAt     time.Time         `json:"created_at"`
	// Container is the runsc container id, which also keys the sandbox's
	// network and cgroups. Empty means ID; it differs when the sandbox was
	// restored into a standby container created ahead under its own id.
	Container string `json:"container,omitempty"`
	// Bundle is the OCI bundle directory when it is not the sandbox's own
	// directory (a standby container's).
	Bundle string `json:"bundle,omitempty"`
	// FromFiles: the container was created with the rootfs-upper tar
	// annotation (CreateFromFilesystem), or restored from an image of one.
	FromFiles bool `json:"from_files,omitempty"`
}

// cid is the runsc container id of h.
func (h handle) cid() string {
	if h.Container != "" {
		return h.Container
	}
	return h.ID
}

// sandboxDir is the bundle and handle directory of id.
func (r *Runtime) sandboxDir(id string) string {
	return filepath.Join(r.cfg.StateDir, "sandboxes", id)
}

// runscRoot is runsc's --root.
func (r *Runtime) runscRoot() string { return filepath.Join(r.cfg.StateDir, "runsc") }

// writeJSON writes v to path atomically (temp file and rename), so readers
// never see half a file.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}

// saveHandle persists h.
func (r *Runtime) saveHandle(h handle) error {
	h.Version = handleVersion
	return writeJSON(filepath.Join(r.sandboxDir(h.ID), "handle.json"), h)
}

// loadHandle reads the handle of id; ErrNotFound if the sandbox is unknown.
func (r *Runtime) loadHandle(id string) (handle, error) {
	var h handle
	b, err := os.ReadFile(filepath.Join(r.sandboxDir(id), "handle.json"))
	if os.IsNotExist(err) {
		return h, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return h, fmt.Errorf("read handle of %s: %w", id, err)
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("decode handle of %s: %w", id, errdefs.ErrInternal)
	}
	if h.Version != handleVersion {
		return h, fmt.Errorf("handle of %s has version %d, want %d: %w", id, h.Version, handleVersion, errdefs.ErrInternal)
	}
	return h, nil
}
