package images

import (
	"testing"

	"github.com/forkbox/forkbox/internal/deptest"
)

// TestDeps: the image store is a layer below its users — records name its
// refs, never the other way round — so an object-store backend can replace
// the disk without touching them.
func TestDeps(t *testing.T) {
	deptest.DepChecker{BadDeps: map[string]string{
		"github.com/forkbox/forkbox/internal/store":          "records name image refs; the image store knows no records",
		"github.com/forkbox/forkbox/internal/sandbox":        "the Manager holds content; the store does not call it",
		"github.com/forkbox/forkbox/internal/template/build": "the build service holds content; the store does not call it",
		"github.com/forkbox/forkbox/internal/oci":            "an unpacked image is a layer like any other",
	}}.Check(t)
}
