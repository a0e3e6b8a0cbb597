package main

import (
	"fmt"
	"net/netip"

	"github.com/spf13/pflag"

	"github.com/forkbox/forkbox/internal/daemon"
)

// egressOptions reads --egress-open, --egress-dns and --egress-ca-file.
func egressOptions(f *pflag.FlagSet) (daemon.EgressOptions, error) {
	var o daemon.EgressOptions
	open, _ := f.GetStringSlice("egress-open")
	for _, s := range open {
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is4() {
			return o, fmt.Errorf("--egress-open %q: not an IPv4 CIDR", s)
		}
		o.Open = append(o.Open, p.Masked())
	}
	o.DNS, _ = f.GetString("egress-dns")
	o.CAFile, _ = f.GetString("egress-ca-file")
	return o, nil
}
