package sandbox

import (
	"context"
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/netpolicy"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
)

// NetworkRequest is a sandbox's egress rules as a create or
// PUT /sandboxes/{id}/network states them.
type NetworkRequest struct {
	// Rules are allowOut and denyOut; nil means none.
	Rules *netpolicy.Rules
	// AllowInternet, when nil, means true (E2B's default).
	AllowInternet *bool
	// IAM is the workload tokens the rules may name (a network update
	// keeps the sandbox's).
	IAM *netpolicy.IAM
}

// iamOf is iam, or nil when it names no token.
func iamOf(iam *netpolicy.IAM) *netpolicy.IAM {
	if iam == nil || len(iam.Tokens) == 0 {
		return nil
	}
	return iam
}

// compileNetwork validates r against the operator's opened ranges and the
// daemon's check (CheckNetwork) and returns the normalised rules to store
// (nil when empty) and the internet flag.
func (m *Manager) compileNetwork(ctx context.Context, r NetworkRequest) (*netpolicy.Rules, bool, error) {
	allow := r.AllowInternet == nil || *r.AllowInternet
	var rules netpolicy.Rules
	if r.Rules != nil {
		rules = *r.Rules
	}
	norm, _, err := netpolicy.Compile(rules, allow, m.cfg.NetworkOpened)
	if err != nil {
		return nil, false, err
	}
	if err := netpolicy.CheckIAM(r.IAM); err != nil {
		return nil, false, err
	}
	if err := netpolicy.CheckTokenRefs(norm, r.IAM); err != nil {
		return nil, false, err
	}
	if norm.IsZero() {
		return nil, allow, nil
	}
	if m.cfg.CheckNetwork != nil {
		if err := m.cfg.CheckNetwork(ctx, norm); err != nil {
			return nil, false, err
		}
	}
	return &norm, allow, nil
}

// egress is the runtime policy of rec: nil when it has no rules (the
// runtime's internet on/off then applies).
func (m *Manager) egress(rec *store.Sandbox) *netpolicy.Policy {
	if rec.Network == nil {
		return nil
	}
	_, p, err := netpolicy.Compile(*rec.Network, rec.AllowInternet, m.cfg.NetworkOpened)
	if err != nil {
		// Stored rules were valid when stored; if the operator has since
		// closed a range, fail closed rather than open.
		m.log.Error("stored network rules no longer valid; denying all egress", "sandbox", rec.ID, "err", err)
		_, p, _ = netpolicy.Compile(netpolicy.Rules{}, false, nil)
	}
	return &p
}

// SetNetwork replaces the egress rules of a running or paused sandbox; an
// omitted field is cleared. A running sandbox's kernel rules change in
// place (established connections stay); a paused one gets them at resume.
// The runtime call runs under the manager's lock: it is one nftables
// transaction (about a millisecond), and holding the lock keeps every
// lifecycle operation from starting meanwhile, so the rules cannot land
// on a sandbox that is being paused or rolled back.
func (m *Manager) SetNetwork(ctx context.Context, id string, r NetworkRequest) (*Sandbox, error) {
	sb, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	r.IAM = sb.IAM // set at create, never changed: the rules may name its tokens
	rules, allow, err := m.compileNetwork(ctx, r)
	if err != nil {
		return nil, err
	}
	return m.update(ctx, id, func(e *entry) error {
		switch e.state {
		case StatePaused:
		case StateRunning:
			next := e.rec
			next.Network, next.AllowInternet = rules, allow
			if err := m.applyNetwork(ctx, &next); err != nil {
				return err
			}
		default:
			return fmt.Errorf("sandbox %s is %s: %w", id, e.state, errdefs.ErrConflict)
		}
		e.rec.Network, e.rec.AllowInternet = rules, allow
		m.log.Info("sandbox network rules changed", "sandbox", id, "allowInternet", allow)
		return nil
	})
}

// applyNetwork enforces rec's rules on its running sandbox.
func (m *Manager) applyNetwork(ctx context.Context, rec *store.Sandbox) error {
	np, ok := m.rt.(runtime.NetworkPolicer)
	if !ok {
		return fmt.Errorf("runtime %s cannot change network rules: %w", m.rt.Name(), errdefs.ErrUnavailable)
	}
	p := m.egress(rec)
	if p == nil {
		_, base, _ := netpolicy.Compile(netpolicy.Rules{}, rec.AllowInternet, nil)
		p = &base
	}
	if err := np.SetNetworkPolicy(ctx, rec.ID, *p); err != nil {
		return fmt.Errorf("network rules of %s: %w", rec.ID, err)
	}
	return nil
}

// recordNetwork validates req's egress rules and data-plane settings into
// rec. A create from a snapshot that states no egress rules inherits the
// snapshot's, and one that states no data-plane settings inherits those.
func (m *Manager) recordNetwork(ctx context.Context, rec *store.Sandbox, req CreateRequest, tpl *store.Template) error {
	snap := tpl.Kind == store.KindSnapshot
	nr := NetworkRequest{Rules: req.Network, AllowInternet: req.AllowInternet, IAM: req.IAM}
	if nr.Rules == nil && nr.AllowInternet == nil && snap {
		nr = NetworkRequest{Rules: tpl.Network, AllowInternet: tpl.AllowInternet, IAM: tpl.IAM}
	} else if nr.IAM == nil && snap {
		nr.IAM = tpl.IAM
	}
	rules, allow, err := m.compileNetwork(ctx, nr)
	if err != nil {
		return err
	}
	rec.Network, rec.AllowInternet, rec.IAM = rules, allow, iamOf(nr.IAM)
	in, private := req.Inbound, req.PrivateTraffic
	if in == nil && !private && snap {
		in, private = tpl.Inbound, tpl.PrivateTraffic
	}
	rec.Inbound = nil
	if in != nil {
		norm, err := netpolicy.CheckInbound(*in, m.cfg.AgentPort)
		if err != nil {
			return err
		}
		if !norm.IsZero() {
			rec.Inbound = &norm
		}
	}
	if private && !rec.PrivateTraffic {
		rec.PrivateTraffic, rec.Secure = true, true
		if rec.EnvdAccessToken == "" {
			rec.EnvdAccessToken, rec.TrafficAccessToken = newToken(), newToken()
		}
	}
	return nil
}
