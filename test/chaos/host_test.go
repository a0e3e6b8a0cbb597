package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/forkbox/forkbox/internal/daemon"
	"github.com/forkbox/forkbox/internal/runtime/gvisor"
)

// cgroupControllers are the cgroup v1 hierarchies a sandbox gets a cgroup
// in (below the daemon's cgroup parent, named by its container).
var cgroupControllers = []string{"memory", "pids", "cpu"}

// cgroupDirs are the sandbox cgroups under controller of the run's daemon
// of network index: its cgroup parent is its own (daemon.CgroupParent), so
// other daemons on the machine never show up here.
func cgroupDirs(index int, controller string) []string {
	parent := daemon.CgroupParent(index)
	ents, _ := os.ReadDir(filepath.Join("/sys/fs/cgroup", controller, parent))
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// hostProblems compares what stopped node n left on the host with what
// was listed for it: exactly its running sandboxes' containers, processes,
// namespaces, cgroups, links and firewall objects, and exactly the paused
// sandboxes' and the snapshots' images (none with a cluster's bucket).
// Pooled and standby containers are the daemon's own and must be gone once
// it has stopped.
func (r *run) hostProblems(n *node, l listed) []string {
	want := l.cids()
	var p problems
	dataDir := n.d.DataDir
	root := filepath.Join(dataDir, "runtime", "runsc")
	procs := map[string]bool{}
	for _, rp := range gvisor.RunscProcesses(root) {
		procs[rp.Container] = true
	}
	p.same("runsc processes' containers", slices.Sorted(maps.Keys(procs)), want)
	p.same("runsc containers", runscList(n.d.Bin, root, &p), want)
	p.same("network namespaces", netnsNames(n.index), want)
	for _, c := range cgroupControllers {
		p.same(c+" cgroups", cgroupDirs(n.index, c), want)
	}
	links := hostLinks(n.index, &p)
	p.same("host links' sandboxes", slices.Sorted(maps.Values(links)), want)
	nftProblems(&p, n.index, slices.Sorted(maps.Keys(links)))
	images := filepath.Join(dataDir, "images")
	if r.cl != nil {
		// With the bucket, images are there and in the cache only.
		p.same("images on local disk", dirNames(images), nil)
	} else {
		p.same("pause images", dirNames(filepath.Join(images, "paused")), l.paused)
		p.same("snapshot images", dirNames(filepath.Join(images, "snapshots")), l.snapshots)
	}
	p.same("sandbox bundles", dirNames(filepath.Join(dataDir, "runtime", "sandboxes")), l.running)
	var policies []string
	for _, name := range dirNames(fmt.Sprintf("/run/forkbox/forkbox%d", n.index)) {
		policies = append(policies, strings.TrimSuffix(name, ".json"))
	}
	p.same("saved network policies", policies, want)
	volumeProblems(&p, dataDir, l, want)
	for _, c := range dirNames(filepath.Join(dataDir, "runtime", "containers")) {
		if !slices.Contains(want, c) {
			p.add("container bundle %s belongs to no running sandbox", c)
		}
	}
	return p
}

// problems collects findings.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// same reports a difference between the host's got and the listed want.
func (p *problems) same(what string, got, want []string) {
	slices.Sort(got)
	var extra, missing []string
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	if len(extra) > 0 {
		p.add("%s of nothing listed (leaked): %v", what, extra)
	}
	if len(missing) > 0 {
		p.add("%s missing for listed %v", what, missing)
	}
}

// runscList is runsc's own list of containers under root (runsc in bin).
func runscList(bin, root string, p *problems) []string {
	out, err := exec.Command(filepath.Join(bin, "runsc"), "--root", root, "list", "--format=json").Output()
	if err != nil {
		p.add("runsc list: %v", err)
		return nil
	}
	var list []struct{ ID string }
	if err := json.Unmarshal(bytes.TrimSpace(out), &list); err != nil && len(bytes.TrimSpace(out)) > 0 && string(bytes.TrimSpace(out)) != "null" {
		p.add("runsc list: %v: %s", err, out)
	}
	var ids []string
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	return ids
}

// netnsNames are the network namespaces of the run's daemon of network
// index, by container.
func netnsNames(index int) []string {
	var out []string
	for _, name := range dirNames("/var/run/netns") {
		if id, ok := strings.CutPrefix(name, daemon.NetNSPrefix(index)); ok {
			out = append(out, id)
		}
	}
	return out
}

// hostLinks maps the host-side veth names of the run's daemon of network
// index to the container their alias names.
func hostLinks(index int, p *problems) map[string]string {
	all, err := netlink.LinkList()
	if err != nil {
		p.add("list links: %v", err)
		return nil
	}
	prefix := fmt.Sprintf("fb%dh", index)
	out := map[string]string{}
	for _, l := range all {
		if a := l.Attrs(); strings.HasPrefix(a.Name, prefix) {
			id, _, _ := strings.Cut(a.Alias, ":")
			out[a.Name] = id
		}
	}
	return out
}

// nftProblems checks the firewall table of network index holds per-sandbox
// objects (verdict map elements, chains, sets) for the host links in links
// and no others.
func nftProblems(p *problems, index int, links []string) {
	c, err := nftables.New()
	if err != nil {
		p.add("nftables: %v", err)
		return
	}
	t := &nftables.Table{Name: fmt.Sprintf("forkbox%d", index), Family: nftables.TableFamilyINet}
	for _, name := range []string{"policy", "natpolicy"} {
		set, err := c.GetSetByName(t, name)
		if err != nil {
			p.add("nftables map %s: %v", name, err)
			continue
		}
		elems, err := c.GetSetElements(set)
		if err != nil {
			p.add("nftables map %s: %v", name, err)
			continue
		}
		var keys []string
		for _, e := range elems {
			keys = append(keys, string(bytes.TrimRight(e.Key, "\x00")))
		}
		p.same("nftables "+name+" elements", keys, links)
	}
	nftSlotObjects(p, c, t, len(links))
}

// nftSlotObjects counts the per-sandbox chains (sb<N>, nat<N>) and sets
// (a<N>, d<N>): one of each per sandbox link.
func nftSlotObjects(p *problems, c *nftables.Conn, t *nftables.Table, n int) {
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		p.add("nftables chains: %v", err)
	}
	count := map[string]int{}
	for _, ch := range chains {
		if ch.Table.Name == t.Name {
			count[slotKind(ch.Name, "sb", "nat")]++
		}
	}
	sets, err := c.GetSets(t)
	if err != nil {
		p.add("nftables sets: %v", err)
	}
	for _, s := range sets {
		count[slotKind(s.Name, "a", "d")]++
	}
	for _, kind := range []string{"sb", "nat", "a", "d"} {
		if count[kind] != n {
			p.add("nftables: %d %s<N> objects for %d sandbox links", count[kind], kind, n)
		}
	}
}

// slotKind returns the prefix of a per-slot object name (sb12 → sb), ""
// for other names.
func slotKind(name string, prefixes ...string) string {
	for _, pre := range prefixes {
		if rest, ok := strings.CutPrefix(name, pre); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			return pre
		}
	}
	return ""
}

// volumeProblems accounts for the volumes of the daemon of dataDir: one
// attach directory per running container (paused sandboxes hold none),
// the storage of exactly the listed volumes, each mounted once, and no
// other mount of the daemon's volumes anywhere under the data dir.
func volumeProblems(p *problems, dataDir string, l listed, cids []string) {
	attach := filepath.Join(dataDir, "runtime", "volumes")
	p.same("volume attach dirs", dirNames(attach), cids)
	store := filepath.Join(dataDir, "volumes")
	p.same("volume storage", dirNames(store), l.volumes)
	mounts := mountPoints()
	for _, v := range l.volumes {
		if !mounts[filepath.Join(store, v, "mnt")] {
			p.add("volume %s is not mounted", v)
		}
	}
	for m := range mounts {
		rel, err := filepath.Rel(attach, m)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		if cid, _, _ := strings.Cut(rel, "/"); !slices.Contains(cids, cid) {
			p.add("mount %s of no running container", m)
		}
	}
}

// mountPoints is the set of the host's mount points.
func mountPoints() map[string]bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			out[f[4]] = true
		}
	}
	return out
}
