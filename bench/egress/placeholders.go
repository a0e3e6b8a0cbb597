package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"time"

	"github.com/forkbox/forkbox/internal/egress"
	"github.com/forkbox/forkbox/internal/identity"
	"github.com/forkbox/forkbox/internal/netpolicy"
	"github.com/forkbox/forkbox/internal/secrets"
	"github.com/forkbox/forkbox/internal/store"
)

// filling is what the proxy fills rules' placeholders from in the bench:
// the daemon's parts (a vault over a real SQLite store, AES-GCM; the OIDC
// issuer, ES256), wired as internal/daemon wires them.
type filling struct {
	vault  *secrets.Vault
	issuer *identity.Issuer
	dir    string
	st     *store.Store
}

func newFilling(ctx context.Context) (*filling, error) {
	dir, err := os.MkdirTemp("", "egress-bench-")
	if err != nil {
		return nil, err
	}
	f := &filling{dir: dir}
	if f.st, err = store.Open(ctx, dir); err != nil {
		return nil, err
	}
	key, err := secrets.LoadOrCreateKey(dir+"/"+secrets.KeyFile, true)
	if err != nil {
		return nil, err
	}
	if f.vault, err = secrets.New(f.st, key, nil, nil); err != nil {
		return nil, err
	}
	if _, err := f.vault.Create(ctx, "bench-key", "sk-bench-0123456789abcdef", nil); err != nil {
		return nil, err
	}
	f.issuer, err = identity.New(identity.Config{Issuer: "http://127.0.0.1:3000", Dir: dir})
	return f, err
}

func (f *filling) close() {
	f.st.Close()
	os.RemoveAll(f.dir)
}

// expander fills in secrets from the vault and tokens from the issuer
// for a sandbox "egbench0" of template "base".
func (f *filling) expander() egress.Expander {
	return egress.ExpanderFunc(func(ctx context.Context, _ netip.Addr, v string) (string, error) {
		return netpolicy.Expand(v, func(r netpolicy.Ref) (string, error) {
			if r.Kind == netpolicy.KindToken {
				return f.issuer.Token(ctx, identity.Subject{SandboxID: "egbench0", TemplateID: "base", Team: identity.Team}, "https://"+name)
			}
			return f.vault.Resolve(ctx, r.Name)
		})
	})
}

// placeholderPaths are the paths whose rule header is filled in per request.
func placeholderPaths(cas *benchCAs) []path {
	rule := func(v string) netpolicy.Policy {
		return policy(netpolicy.Rules{AllowOut: []string{name}, Rules: map[string][]netpolicy.Rule{
			name: {{Transform: &netpolicy.Transform{Headers: map[string]string{"Authorization": "Bearer " + v}}}}}})
	}
	const sec, tok = "${e2b.secrets.bench-key}", "${e2b.identity.tokens.bench}"
	return []path{
		{label: "HTTP, a rules header (static)", pol: rule("bench")},
		{label: "HTTP, a rules header from a secret", pol: rule(sec)},
		{label: "HTTP, a rules header with a workload token", pol: rule(tok)},
		{label: "HTTPS intercepted, a header from a secret", pol: rule(sec), tls: true, roots: cas.egressPool},
		{label: "HTTPS intercepted, a header with a workload token", pol: rule(tok), tls: true, roots: cas.egressPool},
	}
}

// costs times the two lookups alone: a secret's resolution (a store read
// and an AES-GCM open) and a fresh token (an ES256 signature; a sandbox's
// next requests reuse it for two thirds of its life).
func (f *filling) costs(ctx context.Context, n int) (string, error) {
	var res, sign []float64
	for i := range n {
		t := time.Now()
		if _, err := f.vault.Resolve(ctx, "bench-key"); err != nil {
			return "", err
		}
		res = append(res, float64(time.Since(t).Nanoseconds())/1000)
		t = time.Now()
		if _, err := f.issuer.Token(ctx, identity.Subject{SandboxID: fmt.Sprint("s", i), TemplateID: "base", Team: identity.Team}, "aud"); err != nil {
			return "", err
		}
		sign = append(sign, float64(time.Since(t).Nanoseconds())/1000)
	}
	sort.Float64s(res)
	sort.Float64s(sign)
	return fmt.Sprintf("Alone (n=%d, medians): resolving a secret %.0f µs, minting a fresh token %.0f µs.", n, res[n/2], sign[n/2]), nil
}
