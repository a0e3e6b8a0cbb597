// Package volumes owns the host storage of named volumes: each volume is
// an ext4 image file of its size limit, loop-mounted on the host, so a
// sandbox writing past the limit gets a real ENOSPC through gVisor's
// gofer, and the content API works on the same mounted directory with
// every path resolved beneath the volume's root (no escape through ".."
// or symlinks). It keeps files; the records are the store's, the
// decisions (who mounts what, when a delete is refused) the Manager's.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// DefaultSizeMB is a volume's size limit when the daemon names none
// (--volume-size).
const DefaultSizeMB = 1024

// Default owner of a volume's root and of what the content API creates
// without uid/gid: E2B's default sandbox user ("user", 1000:1000), so the
// sandbox's default user can write where the volume is mounted.
const (
	DefaultUID = 1000
	DefaultGID = 1000
)

// Host keeps the volumes of one data directory. It is safe for
// concurrent use.
type Host struct {
	dir string
	log *slog.Logger
	mu  sync.Mutex // serialises mounts and unmounts
}

// New returns the volume storage rooted at dir (created if needed).
func New(dir string, log *slog.Logger) (*Host, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("volume dir: %w", err)
	}
	return &Host{dir: dir, log: log}, nil
}

func (h *Host) image(id string) string { return filepath.Join(h.dir, id, "volume.ext4") }

// Dir is the host directory volume id's files are in while it is mounted
// (Ensure): what sandboxes bind and the content API serves.
func (h *Host) Dir(id string) string { return filepath.Join(h.dir, id, "mnt") }

// Create makes volume id's storage: a sparse image of sizeMB, formatted
// ext4 with no reserved blocks (the whole limit is the user's), mounted.
// On failure nothing is left.
func (h *Host) Create(ctx context.Context, id string, sizeMB int) (err error) {
	if sizeMB <= 0 {
		return fmt.Errorf("volume size %d MB: %w", sizeMB, errdefs.ErrInvalidArgument)
	}
	base := filepath.Join(h.dir, id)
	if err := os.Mkdir(base, 0o700); err != nil {
		return fmt.Errorf("volume %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			h.Remove(context.WithoutCancel(ctx), id)
		}
	}()
	if err := os.WriteFile(h.image(id), nil, 0o600); err != nil {
		return err
	}
	if err := os.Truncate(h.image(id), int64(sizeMB)<<20); err != nil {
		return fmt.Errorf("size volume image: %w", err)
	}
	owner := strconv.Itoa(DefaultUID) + ":" + strconv.Itoa(DefaultGID)
	out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0",
		"-E", "root_owner="+owner+",lazy_itable_init=1", "-O", "^has_journal", h.image(id)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4: %v: %s", err, out)
	}
	if err := h.Ensure(ctx, id); err != nil {
		return err
	}
	// lost+found is ext4's, not the user's: E2B's volumes start empty.
	return os.Remove(filepath.Join(h.Dir(id), "lost+found"))
}

// Ensure mounts volume id if it is not mounted (after a host reboot the
// image is there, the mount is not). A volume with no storage here
// (another node's) is ErrNotFound and leaves nothing behind.
func (h *Host) Ensure(ctx context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := os.Stat(h.image(id)); err != nil {
		return fmt.Errorf("volume %s storage: %w", id, errdefs.ErrNotFound)
	}
	dir := h.Dir(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if isMountPoint(dir) {
		return nil
	}
	if err := mountImage(h.image(id), dir); err != nil {
		return fmt.Errorf("volume %s: %w", id, err)
	}
	h.log.Debug("volume mounted", "volume", id, "dir", dir)
	return nil
}

// IDs lists the volumes that have storage here.
func (h *Host) IDs() ([]string, error) {
	entries, err := os.ReadDir(h.dir)
	if err != nil {
		return nil, fmt.Errorf("volume dir: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// Remove unmounts and deletes volume id's storage; a missing one is not
// an error.
func (h *Host) Remove(ctx context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	dir := h.Dir(id)
	if isMountPoint(dir) {
		if err := unmount(dir); err != nil {
			return fmt.Errorf("unmount volume %s: %w", id, err)
		}
	}
	if err := os.RemoveAll(filepath.Join(h.dir, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove volume %s: %w", id, err)
	}
	return nil
}
