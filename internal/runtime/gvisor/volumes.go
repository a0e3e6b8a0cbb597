package gvisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/internal/runtime"
)

// Volumes (runtime.Spec.Volumes) reach a sandbox through one bind mount
// every sandbox has, at runtime.VolumeRoot, of a per-container host
// directory: a tiny read-only tmpfs holding one bind mount per volume
// (0, 1, …). Restores need the checkpoint's mounts (trap 9), and template
// images are checkpoints made without any volume; with the one mount
// always there, a restore may bring other volumes (or none) in it — the
// gofer binds the source recursively when the container starts. The
// tmpfs is read-only so the sandbox cannot fill the host through it.

// volumesDir is container cid's attach directory. It lies outside every
// bundle: a bundle's RemoveAll must never reach into a volume.
func (r *Runtime) volumesDir(cid string) string {
	return filepath.Join(r.cfg.StateDir, "volumes", cid)
}

// volumeMount is the spec mount of the attach directory dir.
func volumeMount(dir string) specs.Mount {
	return specs.Mount{Destination: runtime.VolumeRoot, Type: "bind", Source: dir, Options: []string{"rbind", "rw"}}
}

// attachVolumes makes container cid's attach directory with vols bound
// in it, replacing one an earlier container of cid left, and returns it.
// The mount point must exist in rootfs, or the gofer would make it there
// itself (trap 3): it is made here, once per root filesystem.
func (r *Runtime) attachVolumes(cid, rootfs string, vols []string) (dir string, err error) {
	if err := os.Mkdir(filepath.Join(rootfs, runtime.VolumeRoot), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("volume mount point: %w", err)
	}
	if err := r.detachVolumes(cid); err != nil {
		return "", err
	}
	dir = r.volumesDir(cid)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			r.detachVolumes(cid)
		}
	}()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64k,nr_inodes=128,mode=0755"); err != nil {
		return "", fmt.Errorf("volume attach dir: %w", err)
	}
	for i, v := range vols {
		p := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(p, 0o755); err != nil {
			return "", err
		}
		if err := unix.Mount(v, p, "", unix.MS_BIND, ""); err != nil {
			return "", fmt.Errorf("bind volume %s: %w", v, err)
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return "", fmt.Errorf("volume attach dir read-only: %w", err)
	}
	return dir, nil
}

// detachVolumes removes container cid's attach directory: a lazy unmount
// takes the binds with it, then an rmdir (never a RemoveAll, which would
// follow a bind still there into the volume).
func (r *Runtime) detachVolumes(cid string) error {
	dir := r.volumesDir(cid)
	for {
		err := unix.Unmount(dir, unix.MNT_DETACH)
		if err != nil {
			break // EINVAL: not a mount point (any more); ENOENT: no dir
		}
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove volume attach dir of %s: %w", cid, err)
	}
	return nil
}
