package faults

import (
	"context"
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/netpolicy"
	"github.com/forkbox/forkbox/internal/runtime"
)

// SetNetworkPolicy passes to the wrapped backend (it injects no faults).
func (r *Runtime) SetNetworkPolicy(ctx context.Context, id string, p netpolicy.Policy) error {
	np, ok := r.Runtime.(runtime.NetworkPolicer)
	if !ok {
		return fmt.Errorf("%s cannot change network policies: %w", r.Name(), errdefs.ErrUnavailable)
	}
	return np.SetNetworkPolicy(ctx, id, p)
}
