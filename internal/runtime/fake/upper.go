package fake

import (
	"context"
	"fmt"
	"os"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// FileLister is implemented by handlers that keep files (runtimetest's
// Handler): WriteUpperLayer puts them in the tar.
type FileLister interface {
	Files() map[string]string
}

var _ runtime.UpperLayerWriter = (*Runtime)(nil)

// WriteUpperLayer implements runtime.UpperLayerWriter: a tar of the root
// and, if the handler is a FileLister, its files (parent directories
// included, as an overlay's upper layer holds them).
func (r *Runtime) WriteUpperLayer(ctx context.Context, id string, path string) error {
	r.mu.Lock()
	sb, err := r.getLocked(id)
	var files map[string]string
	if err == nil {
		if sb.state == runtime.StateStopped {
			err = fmt.Errorf("sandbox %s is stopped: %w", id, errdefs.ErrConflict)
		} else if fl, ok := sb.handler.(FileLister); ok {
			files = fl.Files()
		}
	}
	r.mu.Unlock()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	return writeFilesTar(f, files)
}
