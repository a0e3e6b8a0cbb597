package cli

import (
	"errors"
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
			s, err := a.client().GetSandbox(cmd.Context(), args[0])
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

// printNetwork shows a sandbox's egress rules.
func (a *app) printNetwork(s *client.SandboxInfo) error {
	rules := s.Network
	if rules == nil {
		rules = &client.NetworkRules{}
	}
	if a.json {
		internet := s.AllowInternetAccess == nil || *s.AllowInternetAccess
		return a.printJSON(struct {
			SandboxID     string   `json:"sandboxID"`
			AllowInternet bool     `json:"allowInternetAccess"`
			AllowOut      []string `json:"allowOut"`
			DenyOut       []string `json:"denyOut"`
		}{s.SandboxID, internet, nonNil(rules.AllowOut), nonNil(rules.DenyOut)})
	}
	internet := "yes"
	if s.AllowInternetAccess != nil && !*s.AllowInternetAccess {
		internet = "no (0.0.0.0/0 denied)"
	}
	return fields(a.stdout, [][2]string{
		{"Sandbox ID", s.SandboxID}, {"Internet", internet},
		{"Allow out", orDash(strings.Join(rules.AllowOut, ", "))},
		{"Deny out", orDash(strings.Join(rules.DenyOut, ", "))},
	})
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
