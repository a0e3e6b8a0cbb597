package netpolicy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// MaxHTTPSPorts caps Inbound.HTTPSPorts.
const MaxHTTPSPorts = 64

// PortPlaceholder is replaced by the port a request is for in
// Inbound.MaskRequestHost.
const PortPlaceholder = "${PORT}"

// Inbound is how the data plane reaches a sandbox's ports (E2B's
// network.maskRequestHost and network.httpsPorts). The zero value forwards
// the client's Host over plain HTTP.
type Inbound struct {
	// MaskRequestHost replaces the Host of every request forwarded to the
	// sandbox, with ${PORT} standing for the port.
	MaskRequestHost string `json:"maskRequestHost,omitempty"`
	// HTTPSPorts are ports the proxy reaches over TLS, without verifying
	// the sandbox's certificate (self-signed ones work).
	HTTPSPorts []int `json:"httpsPorts,omitempty"`
}

// IsZero reports whether in changes nothing.
func (in Inbound) IsZero() bool { return in.MaskRequestHost == "" && len(in.HTTPSPorts) == 0 }

// Host returns the Host a request for port must carry: the mask with the
// port substituted, or "" to keep the client's.
func (in Inbound) Host(port int) string {
	if in.MaskRequestHost == "" {
		return ""
	}
	return strings.ReplaceAll(in.MaskRequestHost, PortPlaceholder, strconv.Itoa(port))
}

// IsHTTPS reports whether port is reached over TLS.
func (in Inbound) IsHTTPS(port int) bool { return slices.Contains(in.HTTPSPorts, port) }

// CheckInbound validates in and returns its normal form (ports sorted,
// duplicates dropped). envdPort, the agent's, is never HTTPS: the daemon
// and the SDKs talk to it in plain HTTP.
func CheckInbound(in Inbound, envdPort int) (Inbound, error) {
	if m := in.MaskRequestHost; m != "" {
		if len(m) > 255 || !httpguts.ValidHostHeader(in.Host(65535)) || strings.ContainsAny(m, " \t") {
			return Inbound{}, fmt.Errorf("maskRequestHost %q is not a valid Host (with %s replaced by the port): %w", m, PortPlaceholder, errdefs.ErrInvalidArgument)
		}
	}
	if len(in.HTTPSPorts) > MaxHTTPSPorts {
		return Inbound{}, fmt.Errorf("httpsPorts has %d ports, the limit is %d: %w", len(in.HTTPSPorts), MaxHTTPSPorts, errdefs.ErrInvalidArgument)
	}
	var ports []int
	for _, p := range in.HTTPSPorts {
		switch {
		case p < 1 || p > 65535:
			return Inbound{}, fmt.Errorf("httpsPorts: %d is not a port: %w", p, errdefs.ErrInvalidArgument)
		case p == envdPort:
			return Inbound{}, fmt.Errorf("httpsPorts: the envd port %d cannot be listed: %w", p, errdefs.ErrInvalidArgument)
		}
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	slices.Sort(ports)
	return Inbound{MaskRequestHost: in.MaskRequestHost, HTTPSPorts: ports}, nil
}
