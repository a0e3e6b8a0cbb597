package cli

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

// networkFlags are the rule-setting flags of `sandbox network`.
type networkFlags struct {
	allowOut, denyOut, rules []string
	internet, clear          bool
	proxy, proxyUser         string
	proxyPassword            string
}

// networkLong is the help of `sandbox network`.
const networkLong = `Show the network settings of a sandbox or, with any of --allow-out, --deny-out,
--rule, --egress-proxy, --internet or --clear, replace its egress rules while it
runs (E2B's updateNetwork). The new rule set replaces the old one whole: what is
not given is cleared (an egress proxy too). Established connections stay up; new
ones follow the new rules.

--deny-out takes IPv4 addresses and CIDRs; --allow-out takes exceptions to the
denials: addresses, CIDRs, host names and *.wildcards (enforced on ports 80 and
443 by the daemon's egress proxy). --internet=false denies 0.0.0.0/0. Private,
link-local (169.254.0.0/16) and host addresses stay unreachable whatever the rules.

--rule DOMAIN=NAME:VALUE sets header NAME on the sandbox's HTTP and HTTPS requests
to DOMAIN (a host name or *.wildcard), replacing the sandbox's own; the sandbox
never sees the value (HTTPS is re-encrypted by the daemon, whose egress CA every
sandbox trusts). Rules grant no access: list the domain in --allow-out too if
--deny-out covers it. Header values are not shown here.

--egress-proxy HOST:PORT tunnels the sandbox's outbound TCP through that SOCKS5
proxy after the rules have filtered it, failing closed (UDP is not tunnelled).
Its password comes from --egress-proxy-password or $FORKBOX_EGRESS_PROXY_PASSWORD
and is never shown.`

func (a *app) sandboxNetworkCmd() *cobra.Command {
	var nf networkFlags
	cmd := &cobra.Command{
		Use:   "network <sandbox-id>",
		Short: "Show or replace a sandbox's egress rules",
		Long:  networkLong,
		Example: `  forkbox sandbox network sbx0001
  forkbox sandbox network sbx0001 --deny-out 0.0.0.0/0 --allow-out api.example.com --allow-out 198.51.100.0/24
  forkbox sandbox network sbx0001 --allow-out api.example.com --rule 'api.example.com=Authorization:Bearer sk-…'
  forkbox sandbox network sbx0001 --egress-proxy proxy.example.com:1080 --egress-proxy-user me
  forkbox sandbox network sbx0001 --internet=false
  forkbox sandbox network sbx0001 --clear --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			changed := false
			for _, n := range []string{"allow-out", "deny-out", "internet", "rule", "egress-proxy"} {
				changed = changed || f.Changed(n)
			}
			if nf.clear && changed {
				return errors.New("--clear cannot be combined with other rules")
			}
			if changed || nf.clear {
				u, err := nf.update(f.Changed("internet"))
				if err != nil {
					return err
				}
				if err := a.client().UpdateNetwork(cmd.Context(), args[0], u); err != nil {
					return err
				}
			}
			s, err := a.client().NetworkStatus(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printNetwork(s)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&nf.allowOut, "allow-out", nil, "allowed destination (address, CIDR, host name or *.wildcard); repeatable")
	f.StringSliceVar(&nf.denyOut, "deny-out", nil, "denied destination (address or CIDR); repeatable")
	f.StringArrayVar(&nf.rules, "rule", nil, "DOMAIN=NAME:VALUE: set header NAME to VALUE on requests to DOMAIN (host name or *.wildcard); repeatable")
	f.StringVar(&nf.proxy, "egress-proxy", "", "HOST:PORT of a SOCKS5 proxy to tunnel outbound TCP through")
	f.StringVar(&nf.proxyUser, "egress-proxy-user", "", "SOCKS5 username of --egress-proxy")
	f.StringVar(&nf.proxyPassword, "egress-proxy-password", "", "SOCKS5 password of --egress-proxy (default $FORKBOX_EGRESS_PROXY_PASSWORD)")
	f.BoolVar(&nf.internet, "internet", true, "allow internet access (false: deny 0.0.0.0/0)")
	f.BoolVar(&nf.clear, "clear", false, "remove every rule (internet on, no proxy)")
	return cmd
}

// update builds the rule set the flags state.
func (nf networkFlags) update(internetSet bool) (client.NetworkUpdate, error) {
	u := client.NetworkUpdate{AllowOut: splitList(nf.allowOut), DenyOut: splitList(nf.denyOut)}
	if internetSet {
		u.AllowInternet = &nf.internet
	}
	for _, r := range nf.rules {
		domain, header, ok1 := strings.Cut(r, "=")
		name, value, ok2 := strings.Cut(header, ":")
		if !ok1 || !ok2 || domain == "" || name == "" {
			return u, fmt.Errorf("--rule %q: want DOMAIN=NAME:VALUE", r)
		}
		if u.Rules == nil {
			u.Rules = map[string][]client.NetworkRule{}
		}
		if len(u.Rules[domain]) == 0 {
			u.Rules[domain] = []client.NetworkRule{{Transform: &client.NetworkTransform{Headers: map[string]string{}}}}
		}
		u.Rules[domain][0].Transform.Headers[strings.TrimSpace(name)] = strings.TrimLeft(value, " ")
	}
	if nf.proxy != "" {
		pw := nf.proxyPassword
		if pw == "" && nf.proxyUser != "" {
			pw = os.Getenv("FORKBOX_EGRESS_PROXY_PASSWORD")
		}
		u.EgressProxy = &client.EgressProxy{Address: nf.proxy, Username: nf.proxyUser, Password: pw}
	}
	return u, nil
}

// printNetwork shows a sandbox's network settings and what they refused.
func (a *app) printNetwork(s *client.NetworkStatus) error {
	n := s.Network
	if a.json {
		return a.printJSON(struct {
			SandboxID          string                          `json:"sandboxID"`
			AllowInternet      bool                            `json:"allowInternetAccess"`
			AllowOut           []string                        `json:"allowOut"`
			DenyOut            []string                        `json:"denyOut"`
			Rules              map[string][]client.NetworkRule `json:"rules"`
			EgressProxy        *client.EgressProxy             `json:"egressProxy"`
			AllowPublicTraffic *bool                           `json:"allowPublicTraffic,omitempty"`
			MaskRequestHost    string                          `json:"maskRequestHost,omitempty"`
			HTTPSPorts         []int                           `json:"httpsPorts,omitempty"`
			Denials            client.Denials                  `json:"denials"`
		}{s.SandboxID, s.AllowInternetAccess, nonNil(n.AllowOut), nonNil(n.DenyOut), nonNilRules(n.Rules), n.EgressProxy,
			n.AllowPublicTraffic, n.MaskRequestHost, n.HTTPSPorts, s.Denials})
	}
	internet := "yes"
	if !s.AllowInternetAccess {
		internet = "no (0.0.0.0/0 denied)"
	}
	rows := [][2]string{
		{"Sandbox ID", s.SandboxID}, {"Internet", internet},
		{"Allow out", orDash(strings.Join(n.AllowOut, ", "))},
		{"Deny out", orDash(strings.Join(n.DenyOut, ", "))},
		{"Rules", orDash(ruleSummary(n.Rules))},
		{"Egress proxy", orDash(proxySummary(n.EgressProxy))},
	}
	rows = append(rows, inboundRows(n)...)
	rows = append(rows, [2]string{"Denied", denialSummary(s.Denials)})
	if err := fields(a.stdout, rows); err != nil {
		return err
	}
	if len(s.Denials.Recent) == 0 {
		return nil
	}
	fmt.Fprintln(a.stdout, "\nRecent denials:")
	recent := make([][]string, 0, len(s.Denials.Recent))
	for _, d := range s.Denials.Recent {
		recent = append(recent, []string{d.Time.Local().Format("15:04:05"), d.Layer, d.Destination, orDash(d.Name), d.Reason, d.Rule})
	}
	return table(a.stdout, []string{"TIME", "LAYER", "DESTINATION", "NAME", "REASON", "RULE"}, recent)
}

// ruleSummary is "api.example.com: Authorization; *.example.org: X-A, X-B":
// domains and header names, never values.
func ruleSummary(rules map[string][]client.NetworkRule) string {
	var parts []string
	for _, domain := range slices.Sorted(maps.Keys(rules)) {
		var names []string
		for _, r := range rules[domain] {
			if r.Transform != nil {
				names = append(names, slices.Sorted(maps.Keys(r.Transform.Headers))...)
			}
		}
		parts = append(parts, domain+": "+orDash(strings.Join(names, ", ")))
	}
	return strings.Join(parts, "; ")
}

// proxySummary is "user@host:port", or "".
func proxySummary(p *client.EgressProxy) string {
	if p == nil {
		return ""
	}
	if p.Username != "" {
		return p.Username + "@" + p.Address
	}
	return p.Address
}

// inboundRows are the data plane's settings, when any differ from the
// defaults.
func inboundRows(n client.NetworkRules) [][2]string {
	var rows [][2]string
	if n.AllowPublicTraffic != nil && !*n.AllowPublicTraffic {
		rows = append(rows, [2]string{"Public traffic", "no (ports need the traffic access token)"})
	}
	if n.MaskRequestHost != "" {
		rows = append(rows, [2]string{"Request host", n.MaskRequestHost})
	}
	if len(n.HTTPSPorts) > 0 {
		ports := make([]string, len(n.HTTPSPorts))
		for i, p := range n.HTTPSPorts {
			ports[i] = fmt.Sprint(p)
		}
		rows = append(rows, [2]string{"HTTPS ports", strings.Join(ports, ", ")})
	}
	return rows
}

func nonNilRules(r map[string][]client.NetworkRule) map[string][]client.NetworkRule {
	if r == nil {
		return map[string][]client.NetworkRule{}
	}
	return r
}

// denialSummary is "7 (denyOut 5, name 2)", or "0".
func denialSummary(d client.Denials) string {
	if d.Total == 0 {
		return "0"
	}
	reasons := make([]string, 0, len(d.ByReason))
	for r := range d.ByReason {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = fmt.Sprintf("%s %d", r, d.ByReason[r])
	}
	return fmt.Sprintf("%d (%s)", d.Total, strings.Join(parts, ", "))
}

// splitList drops empty entries, so --deny-out "" clears the list.
func splitList(in []string) []string {
	var out []string
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
