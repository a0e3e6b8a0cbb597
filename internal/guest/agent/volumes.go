package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// volumeLink is forkbox's /init field forkboxVolumes: the volume the
// daemon put at Target (below runtime.VolumeRoot) appears at Path. The
// sandbox's mounts are fixed by its template image, so a volume is a
// symlink to where the one volume mount holds it, not a mount of its own.
type volumeLink struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

// linkVolumes makes each link, idempotently: a link already there is
// kept, an empty directory at Path (the template's mount point) makes
// way, anything else there is an error, as mounting over it would hide
// the template's files.
func linkVolumes(links []volumeLink) error {
	for _, l := range links {
		if !filepath.IsAbs(l.Path) || filepath.Clean(l.Path) != l.Path || l.Path == "/" {
			return fmt.Errorf("volume path %q: want a clean absolute path", l.Path)
		}
		fi, err := os.Lstat(l.Path)
		switch {
		case err == nil && fi.Mode()&os.ModeSymlink != 0:
			if cur, _ := os.Readlink(l.Path); cur == l.Target {
				continue
			}
			if err := os.Remove(l.Path); err != nil {
				return err
			}
		case err == nil && fi.IsDir():
			if err := os.Remove(l.Path); err != nil {
				return fmt.Errorf("volume path %s is a directory that is not empty", l.Path)
			}
		case err == nil:
			return fmt.Errorf("volume path %s exists and is not a directory", l.Path)
		case !errors.Is(err, os.ErrNotExist):
			return err
		}
		if err := os.MkdirAll(filepath.Dir(l.Path), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(l.Target, l.Path); err != nil {
			return err
		}
	}
	return nil
}
