package daemon

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/forkbox/forkbox/internal/netns"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/gvisor"
)

// newRuntime builds the gVisor backend: per-sandbox network namespaces and
// runsc state under the data dir.
func newRuntime(ctx context.Context, o Options) (runtime.Runtime, error) {
	nm, err := netns.New(ctx, netns.Config{Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("sandbox networking: %w", err)
	}
	rt, err := gvisor.New(ctx, gvisor.Config{
		RunscPath: o.RunscPath,
		StateDir:  filepath.Join(o.DataDir, "runtime"),
		Net:       nm,
		Logger:    o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("gvisor runtime: %w", err)
	}
	return rt, nil
}
