package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
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

// removeStaleImages deletes template images other than keep: they were made
// by an older agent or runsc and will never be restored again.
func removeStaleImages(dir, keep string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), "image-") && p != keep {
			os.RemoveAll(p)
		}
	}
}
