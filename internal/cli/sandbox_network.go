package cli

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

func (a *app) sandboxNetworkCmd() *cobra.Command {
	var allowOut, denyOut []string
	var internet, clear bool
	cmd := &cobra.Command{
		Use:   "network <sandbox-id>",
		Short: "Show or replace a sandbox's egress rules",
		Long: `Show the egress rules of a sandbox or, with any of --allow-out, --deny-out,
--internet or --clear, replace them while it runs (E2B's updateNetwork). The new
rule set replaces the old one whole: what is not given is cleared. Established
connections stay up; new ones follow the new rules.

--deny-out takes IPv4 addresses and CIDRs; --allow-out takes exceptions to the
denials: addresses, CIDRs, host names and *.wildcards (enforced on ports 80 and
443 by the daemon's egress proxy). --internet=false denies 0.0.0.0/0. Private,
link-local (169.254.0.0/16) and host addresses stay unreachable whatever the rules.`,
		Example: `  forkbox sandbox network sbx0001
  forkbox sandbox network sbx0001 --deny-out 0.0.0.0/0 --allow-out api.example.com --allow-out 198.51.100.0/24
  forkbox sandbox network sbx0001 --internet=false
  forkbox sandbox network sbx0001 --clear --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			set := f.Changed("allow-out") || f.Changed("deny-out") || f.Changed("internet") || clear
			if clear && (f.Changed("allow-out") || f.Changed("deny-out") || f.Changed("internet")) {
				return errors.New("--clear cannot be combined with other rules")
			}
			if set {
				u := client.NetworkUpdate{AllowOut: splitList(allowOut), DenyOut: splitList(denyOut)}
				if f.Changed("internet") {
					u.AllowInternet = &internet
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
	f.StringSliceVar(&allowOut, "allow-out", nil, "allowed destination (address, CIDR, host name or *.wildcard); repeatable")
	f.StringSliceVar(&denyOut, "deny-out", nil, "denied destination (address or CIDR); repeatable")
	f.BoolVar(&internet, "internet", true, "allow internet access (false: deny 0.0.0.0/0)")
	f.BoolVar(&clear, "clear", false, "remove every rule (internet on)")
	return cmd
}

// printNetwork shows a sandbox's egress rules and what they refused.
func (a *app) printNetwork(s *client.NetworkStatus) error {
	if a.json {
		return a.printJSON(struct {
			SandboxID     string         `json:"sandboxID"`
			AllowInternet bool           `json:"allowInternetAccess"`
			AllowOut      []string       `json:"allowOut"`
			DenyOut       []string       `json:"denyOut"`
			Denials       client.Denials `json:"denials"`
		}{s.SandboxID, s.AllowInternetAccess, nonNil(s.Network.AllowOut), nonNil(s.Network.DenyOut), s.Denials})
	}
	internet := "yes"
	if !s.AllowInternetAccess {
		internet = "no (0.0.0.0/0 denied)"
	}
	if err := fields(a.stdout, [][2]string{
		{"Sandbox ID", s.SandboxID}, {"Internet", internet},
		{"Allow out", orDash(strings.Join(s.Network.AllowOut, ", "))},
		{"Deny out", orDash(strings.Join(s.Network.DenyOut, ", "))},
		{"Denied", denialSummary(s.Denials)},
	}); err != nil {
		return err
	}
	if len(s.Denials.Recent) == 0 {
		return nil
	}
	fmt.Fprintln(a.stdout, "\nRecent denials:")
	rows := make([][]string, 0, len(s.Denials.Recent))
	for _, d := range s.Denials.Recent {
		rows = append(rows, []string{d.Time.Local().Format("15:04:05"), d.Layer, d.Destination, orDash(d.Name), d.Reason, d.Rule})
	}
	return table(a.stdout, []string{"TIME", "LAYER", "DESTINATION", "NAME", "REASON", "RULE"}, rows)
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
