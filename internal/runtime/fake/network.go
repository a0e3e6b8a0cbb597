package fake

import (
	"context"
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/netpolicy"
)

// SetNetworkPolicy implements runtime.NetworkPolicer by recording p.
func (r *Runtime) SetNetworkPolicy(ctx context.Context, id string, p netpolicy.Policy) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, ok := r.sandboxes[id]
	if !ok {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	sb.spec.Egress = &p
	return nil
}

// Egress returns the egress policy sandbox id runs with (nil: the plain
// internet on/off of its spec) and whether the sandbox exists.
func (r *Runtime) Egress(id string) (*netpolicy.Policy, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, ok := r.sandboxes[id]
	if !ok {
		return nil, false
	}
	return sb.spec.Egress, true
}
