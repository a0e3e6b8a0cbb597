package egress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/forkbox/forkbox/internal/netpolicy"
)

// Expander fills in the placeholders of a rule's header value for the
// sandbox a request comes from, at the time of the request: a secret's
// current value, a workload token valid now. The daemon implements it over
// the secrets vault and the OIDC issuer, so this package knows neither.
type Expander interface {
	// Expand returns value (which holds a placeholder) filled in for the
	// sandbox whose address is src; an error refuses the request, and its
	// text is shown to the sandbox (it must not hold a value).
	Expand(ctx context.Context, src netip.Addr, value string) (string, error)
}

// ExpanderFunc adapts a function to Expander.
type ExpanderFunc func(ctx context.Context, src netip.Addr, value string) (string, error)

// Expand implements Expander.
func (f ExpanderFunc) Expand(ctx context.Context, src netip.Addr, value string) (string, error) {
	return f(ctx, src, value)
}

// expandTimeout bounds one request's placeholder filling (a store read, a
// signature).
const expandTimeout = 5 * time.Second

// setHeaders sets a rule's headers on req, filling in their placeholders.
// On failure the sandbox gets a 502 naming what could not be filled in,
// the denial is reported, and the request is not sent.
func (p *Proxy) setHeaders(req *http.Request, cn *conn, client net.Conn, host string, headers []netpolicy.Header) error {
	for _, h := range headers {
		v := h.Value
		if netpolicy.HasPlaceholder(v) {
			var err error
			if v, err = p.expand(cn.src, v); err != nil {
				why := fmt.Sprintf("header %s: %v", h.Name, err)
				p.deny(cn.src, cn.dst, host, decision{reason: netpolicy.ReasonPlaceholder, why: why})
				writeStatus(client, http.StatusBadGateway, "forkbox egress: request to "+host+" not sent: "+why)
				return err
			}
		}
		req.Header[h.Name] = []string{v}
	}
	return nil
}

func (p *Proxy) expand(src netip.Addr, v string) (string, error) {
	if p.cfg.Placeholders == nil {
		return "", fmt.Errorf("this proxy fills in no placeholders")
	}
	ctx, cancel := context.WithTimeout(context.Background(), expandTimeout)
	defer cancel()
	return p.cfg.Placeholders.Expand(ctx, src, v)
}
