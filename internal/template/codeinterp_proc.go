package template

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// withProc runs fn with /proc mounted in the rootfs: the JDK's package
// scripts run java, which refuses to start without it. The mount is gone
// again before the rootfs is renamed into place. The JDK's scripts also
// link its man pages, which base's dpkg excludes, into /usr/share/man/man1
// and fail when the directory is missing.
func withProc(ctx context.Context, root string, fn func() error) error {
	target := filepath.Join(root, "proc")
	if err := os.MkdirAll(target, 0o555); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, "usr/share/man/man1"), 0o755); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "mount", "-t", "proc", "proc", target).CombinedOutput(); err != nil {
		return fmt.Errorf("mount proc in the rootfs: %v: %s", err, out)
	}
	ferr := fn()
	if out, err := exec.Command("umount", "-l", target).CombinedOutput(); err != nil && ferr == nil {
		ferr = fmt.Errorf("unmount proc in the rootfs: %v: %s", err, out)
	}
	return ferr
}
