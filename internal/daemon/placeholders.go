package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"github.com/forkbox/forkbox/internal/egress"
	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/identity"
	"github.com/forkbox/forkbox/internal/netns"
	"github.com/forkbox/forkbox/internal/netpolicy"
	"github.com/forkbox/forkbox/internal/sandbox"
	"github.com/forkbox/forkbox/internal/secrets"
	"github.com/forkbox/forkbox/internal/store"
)

// fillFunc fills in the placeholders of a header value for a sandbox.
type fillFunc func(ctx context.Context, sandboxID, value string) (string, error)

// fillHook is set once the vault, the issuer and the Manager exist: the
// egress proxy starts before them (the sandbox networks name its port).
type fillHook struct{ f atomic.Pointer[fillFunc] }

func (h *fillHook) set(f fillFunc) { h.f.Store(&f) }

// expander is the proxy's Expander: the sandbox a connection comes from,
// then the hook.
func (e *egressProxy) expander(nm *netns.Manager, hook *fillHook) egress.Expander {
	return egress.ExpanderFunc(func(ctx context.Context, src netip.Addr, value string) (string, error) {
		f := hook.f.Load()
		l, ok := nm.LeaseByAddr(src)
		if !ok || f == nil {
			return "", errors.New("the daemon is not ready to fill in placeholders")
		}
		id, ok := e.owners.sandbox(l.ID)
		if !ok {
			return "", errors.New("connection from no known sandbox")
		}
		return (*f)(ctx, id, value)
	})
}

// prepareData loads (or makes, at first start) what the data dir keeps
// besides the database: the egress CA, the secrets key, the API key.
func prepareData(ctx context.Context, o *Options, st *store.Store) (string, *secrets.Vault, error) {
	if st.Postgres() {
		if err := shareClusterFiles(ctx, *o, st); err != nil {
			return "", nil, err
		}
	}
	if err := o.Egress.prepare(o.DataDir); err != nil {
		return "", nil, err
	}
	vault, err := openVault(*o, st)
	if err != nil {
		return "", nil, err
	}
	key, err := ensureAPIKey(ctx, st, o.DataDir)
	return key, vault, err
}

// openVault opens the secrets vault: its key is --secrets-key-file, or
// <data-dir>/secrets.key made at first start.
func openVault(o Options, st *store.Store) (*secrets.Vault, error) {
	path, create := o.SecretsKeyFile, false
	if path == "" {
		path, create = filepath.Join(o.DataDir, secrets.KeyFile), true
	}
	key, err := secrets.LoadOrCreateKey(path, create)
	if err != nil {
		return nil, err
	}
	return secrets.New(st, key, o.Logger, nil)
}

// checkSecrets is the part of the Manager's CheckNetwork that needs the
// vault: every secret a rule names must exist.
func checkSecrets(v *secrets.Vault, next func(context.Context, netpolicy.Rules) error) func(context.Context, netpolicy.Rules) error {
	return func(ctx context.Context, r netpolicy.Rules) error {
		names, _, err := r.Refs()
		if err != nil {
			return err
		}
		if err := v.Exists(ctx, names); err != nil {
			return err
		}
		return next(ctx, r)
	}
}

// tokenSource mints a sandbox's workload token for one of its iam.tokens.
type tokenSource func(ctx context.Context, sandboxID, name string) (string, error)

// filler fills secrets from v and tokens from tokens (nil: none).
func filler(v *secrets.Vault, tokens tokenSource) fillFunc {
	return func(ctx context.Context, id, value string) (string, error) {
		return netpolicy.Expand(value, func(ref netpolicy.Ref) (string, error) {
			if ref.Kind == netpolicy.KindToken {
				if tokens == nil {
					return "", errors.New("no workload identity issuer")
				}
				return tokens(ctx, id, ref.Name)
			}
			val, err := v.Resolve(ctx, ref.Name)
			if errdefs.IsNotFound(err) {
				return "", fmt.Errorf("secret %q does not exist (deleted after the rule was set)", ref.Name)
			}
			if err != nil {
				return "", fmt.Errorf("secret %q cannot be read", ref.Name)
			}
			return val, nil
		})
	}
}

// fillPlaceholders makes the OIDC issuer and lets the egress proxy fill in
// secrets and tokens.
func fillPlaceholders(o Options, lns *listeners, v *secrets.Vault, mgr *sandbox.Manager) (*identity.Issuer, error) {
	is, err := newIssuer(o, lns)
	if err != nil {
		return nil, err
	}
	o.Egress.fill.set(filler(v, tokensOf(mgr, is)))
	return is, nil
}

// newIssuer is the OIDC issuer of workload tokens: --oidc-issuer, or the
// API's own address, where it serves its discovery document.
func newIssuer(o Options, lns *listeners) (*identity.Issuer, error) {
	iss := o.OIDCIssuer
	if iss == "" {
		iss = "http://" + issuerHost(lns.plain.Addr())
	}
	return identity.New(identity.Config{Issuer: iss, Dir: o.DataDir, Logger: o.Logger})
}

// tokensOf mints a sandbox's token NAME for the audience its iam.tokens
// gives, under the sandbox's own subject (a fork's is its own).
func tokensOf(mgr *sandbox.Manager, is *identity.Issuer) tokenSource {
	return func(ctx context.Context, id, name string) (string, error) {
		sb, err := mgr.Get(ctx, id)
		if err != nil {
			return "", fmt.Errorf("sandbox %s: %w", id, err)
		}
		var tok netpolicy.IAMToken
		if sb.IAM != nil {
			tok = sb.IAM.Tokens[name]
		}
		if tok.Audience == "" {
			return "", fmt.Errorf("iam token %q is not defined for this sandbox", name)
		}
		return is.Token(ctx, identity.Subject{SandboxID: sb.ID, TemplateID: sb.TemplateID, Team: identity.Team}, tok.Audience)
	}
}

// issuerHost is the listen address as a relying party could reach it: an
// unspecified address (0.0.0.0, ::) becomes the host's name.
func issuerHost(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return a.String()
	}
	return net.JoinHostPort(hostname(), strconv.Itoa(tcp.Port))
}
