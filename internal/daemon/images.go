package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/forkbox/forkbox/internal/sandbox"
)

// imageKey names a template image by everything it depends on: the rootfs
// recipe, the agent binary inside it and the runsc that wrote it (a newer
// runsc may not restore an older image).
func imageKey(version string, files ...string) (string, error) {
	h := sha256.New()
	io.WriteString(h, version)
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// staleAfter is how long an image of another agent/runsc build is kept.
// Template directories can be shared by daemons of different builds (tests,
// an upgrade in progress); an image one of them still uses must not vanish
// under it, so only images nobody has rebuilt or touched for a day go.
const staleAfter = 24 * time.Hour

// removeStaleImages deletes template images other than keep and its
// shaped images (keep-c<cpus>-d<disk>, sandbox.shapeImage) that have not
// been written for staleAfter: made by an older agent or runsc, they will
// never be restored again. The scratch directory of a warm whose daemon
// died (kill -9 mid-boot) goes at once, whatever its age.
func removeStaleImages(dir, keep string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if pid, ok := sandbox.ScratchOf(e.Name()); ok {
			if !alive(pid) {
				os.RemoveAll(p)
			}
			continue
		}
		info, err := e.Info()
		if err != nil || !strings.HasPrefix(e.Name(), "image-") || p == keep || strings.HasPrefix(p, keep+"-c") ||
			time.Since(info.ModTime()) < staleAfter {
			continue
		}
		os.RemoveAll(p)
	}
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	return syscall.Kill(pid, 0) != syscall.ESRCH
}
