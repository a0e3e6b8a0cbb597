package gvisor

import (
	"context"
	"os"
	"path/filepath"

	"github.com/forkbox/forkbox/internal/netpolicy"
	"github.com/forkbox/forkbox/internal/runtime"
)

// SetNetworkPolicy implements runtime.NetworkPolicer: the policy of the
// sandbox's network (keyed by its container) is replaced in one nftables
// transaction.
func (r *Runtime) SetNetworkPolicy(ctx context.Context, id string, p netpolicy.Policy) error {
	h, err := r.loadHandle(id)
	if err != nil {
		return err
	}
	return r.cfg.Net.SetPolicy(ctx, h.cid(), p)
}

// applyEgress enforces spec's egress policy on container cid's network,
// which exists already, before the sandbox runs. A spec without one keeps
// the network's internet on/off.
func (r *Runtime) applyEgress(ctx context.Context, cid string, spec runtime.Spec) error {
	if spec.Egress == nil {
		return nil
	}
	return r.cfg.Net.SetPolicy(ctx, cid, *spec.Egress)
}

// NetworkOwners maps the key of each sandbox's network (its container id,
// which differs from the sandbox id for a sandbox restored into a standby
// container) to the sandbox id: the egress proxy and the kernel counters
// know a network, the API a sandbox.
func (r *Runtime) NetworkOwners() map[string]string {
	entries, _ := os.ReadDir(filepath.Join(r.cfg.StateDir, "sandboxes"))
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		if h, err := r.loadHandle(e.Name()); err == nil {
			out[h.cid()] = h.ID
		}
	}
	return out
}
