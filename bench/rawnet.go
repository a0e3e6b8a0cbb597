package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
)

// rawNet is a network namespace for raw runsc, made the way
// docs/runsc-recipes.md does it: a veth pair, host side 10.250.N.1/24,
// sandbox side eth0 10.250.N.2/24 with a default route via the host side.
// No NAT or firewall: the raw sandboxes talk to nobody.
type rawNet struct {
	slot     int
	ns, link string
}

func newRawNet(slot int) rawNet {
	return rawNet{slot: slot, ns: fmt.Sprintf("fbbench-%d", slot), link: fmt.Sprintf("fbbh%d", slot)}
}

func (n rawNet) path() string { return "/var/run/netns/" + n.ns }
func (n rawNet) host() string { return fmt.Sprintf("10.250.%d.1", n.slot) }
func (n rawNet) addr() string { return fmt.Sprintf("10.250.%d.2", n.slot) }

// ip runs one iproute2 command.
func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setup creates the namespace and veth pair, removing leftovers of an
// earlier run with the same names first.
func (n rawNet) setup(ctx context.Context) error {
	n.remove(ctx)
	steps := [][]string{
		{"netns", "add", n.ns},
		{"link", "add", n.link, "type", "veth", "peer", "name", "eth0", "netns", n.ns},
		{"addr", "add", n.host() + "/24", "dev", n.link},
		{"link", "set", n.link, "up"},
		{"-n", n.ns, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := ip(ctx, s...); err != nil {
			return err
		}
	}
	return n.reset(ctx)
}

// reset (re-)adds eth0's address and default route: runsc takes them into
// its own network stack, so a namespace reused after a sandbox was deleted
// has none (design.md trap 5).
func (n rawNet) reset(ctx context.Context) error {
	steps := [][]string{
		{"-n", n.ns, "addr", "replace", n.addr() + "/24", "dev", "eth0"},
		{"-n", n.ns, "link", "set", "eth0", "up"},
		{"-n", n.ns, "route", "replace", "default", "via", n.host()},
	}
	for _, s := range steps {
		if err := ip(ctx, s...); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes the namespace and the host link (either may be missing).
func (n rawNet) remove(ctx context.Context) {
	if err := ip(ctx, "netns", "del", n.ns); err == nil {
		slog.Debug("removed namespace", "ns", n.ns)
	}
	ip(ctx, "link", "del", n.link)
}
