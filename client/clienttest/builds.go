package clienttest

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/oci"
	"github.com/forkbox/forkbox/internal/runtime/fake"
	"github.com/forkbox/forkbox/internal/store"
	"github.com/forkbox/forkbox/internal/template/build"
)

// newBuilds is the template build service of the fake daemon: its routes
// answer as the real daemon's (a build's steps cannot run on the fake
// runtime; it fails at its base).
func newBuilds(t testing.TB, st *store.Store, rt *fake.Runtime, content images.ContentStore, log *slog.Logger) (*build.Service, error) {
	dir := t.TempDir()
	pulls, err := oci.New(oci.Options{CacheDir: filepath.Join(dir, "oci")})
	if err != nil {
		return nil, err
	}
	up, err := build.NewUploads(filepath.Join(dir, "uploads"), 1<<20)
	if err != nil {
		return nil, err
	}
	return build.New(build.Config{Runtime: rt, Store: st, Images: pulls, Content: content, Uploads: up, Dir: filepath.Join(dir, "builds"), Logger: log})
}
