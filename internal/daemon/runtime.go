package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/forkbox/forkbox/internal/egress"
	"github.com/forkbox/forkbox/internal/hostmm"
	"github.com/forkbox/forkbox/internal/netns"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/faults"
	"github.com/forkbox/forkbox/internal/runtime/gvisor"
)

// newRuntime builds the gVisor backend: per-sandbox network namespaces and
// runsc state under the data dir. The returned func releases what the
// backend holds besides sandboxes (its standby containers).
func newRuntime(ctx context.Context, o Options, den *egress.Denials) (runtime.Runtime, func(context.Context) error, error) {
	if o.HostHugePages {
		tuneHugePages(o.Logger)
	}
	eg, err := listenEgress(den)
	if err != nil {
		return nil, nil, err
	}
	ncfg := networkConfig(o)
	ncfg.EgressPort, ncfg.Opened = eg.port(), o.Egress.Open
	nm, err := netns.New(ctx, ncfg)
	if err != nil {
		eg.close()
		return nil, nil, fmt.Errorf("sandbox networking: %w", err)
	}
	if err := eg.serve(o, nm); err != nil {
		eg.close()
		return nil, nil, err
	}
	rt, err := gvisor.New(ctx, gvisor.Config{
		RunscPath:            o.RunscPath,
		StateDir:             filepath.Join(o.DataDir, "runtime"),
		Net:                  nm,
		Logger:               o.Logger,
		Standby:              o.Standby,
		EagerRestore:         o.EagerRestore,
		CollectDuringRestore: o.CollectDuringRestore,
		// Nodes sharing images restore what others wrote, from their own
		// image caches' paths.
		PortableImages:  o.Database != "" && o.ObjectStore != "",
		AppHugePages:    o.AppHugePages,
		SystrapFastPath: o.SystrapFastPath,
		// Its own cgroup parent, like its own networks: a test or bench
		// counting one daemon's cgroups must not see another's.
		CgroupParent: CgroupParent(o.NetworkIndex),
	})
	if err != nil {
		eg.close()
		return nil, nil, fmt.Errorf("gvisor runtime: %w", err)
	}
	eg.owners.setLoad(rt.NetworkOwners)
	closeAll := func(ctx context.Context) error {
		err := rt.Close(ctx)
		eg.close()
		return err
	}
	if spec := os.Getenv(faults.EnvVar); spec != "" {
		o.Logger.Warn("fault injection is on", "faults", spec)
		frt, err := faults.Wrap(rt, spec)
		if err != nil {
			closeAll(ctx)
			return nil, nil, err
		}
		return frt, closeAll, nil
	}
	return rt, closeAll, nil
}

// tuneHugePages lets runsc back sandbox memory with huge pages. It runs
// before the runtime so every sandbox this daemon starts, standby ones
// included, sees the same settings; a host that refuses (read-only sysfs
// in a container) keeps working on small pages.
func tuneHugePages(log *slog.Logger) {
	changes, err := hostmm.Enable(hostmm.DefaultDir)
	for _, c := range changes {
		log.Info("host huge pages: changed for gVisor", "setting", c.Setting, "from", c.From, "to", c.To)
	}
	if err != nil {
		log.Warn("host huge pages: cannot enable, sandboxes use small pages (slower restores)", "err", err)
	}
}

// CgroupParent is the cgroup (under every v1 controller) that the daemon of
// network index n puts its sandboxes' cgroups in: "forkbox" for the default
// daemon, "forkbox<n>" for the others, as its firewall table is named.
func CgroupParent(n int) string {
	if n > 0 {
		return fmt.Sprintf("forkbox%d", n)
	}
	return "forkbox"
}

// NetNSPrefix starts the names of the network namespaces of the daemon of
// network index n > 0 (its sandboxes' ids follow).
func NetNSPrefix(n int) string { return fmt.Sprintf("fbx%d-", n) }

// networkConfig gives daemon number o.NetworkIndex its own subnet, names and
// firewall table: daemons sharing one would each remove the other's
// sandbox networks as leftovers when they start.
func networkConfig(o Options) netns.Config {
	cfg := netns.Config{Logger: o.Logger}
	if n := o.NetworkIndex; n > 0 {
		cfg.Subnet = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(201 + n), 0, 0}), 16)
		cfg.NamePrefix = NetNSPrefix(n)
		cfg.LinkPrefix = fmt.Sprintf("fb%dh", n)
		cfg.Table = fmt.Sprintf("forkbox%d", n)
	}
	return cfg
}
