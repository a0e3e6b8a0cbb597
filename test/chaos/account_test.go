package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemonproc"
	"github.com/forkbox/forkbox/internal/eventlog"
)

// listed is what the daemon lists: sandboxes by state, snapshots.
type listed struct {
	running, paused []string
	snapshots       []string
	volumes         []string
	// containers maps each running sandbox to its runsc container id.
	containers map[string]string
	// nodes maps each sandbox and volume to the id of its node (a
	// cluster's; empty for one daemon).
	nodes map[string]string
}

// cids are the runsc containers of the running sandboxes, sorted.
func (l listed) cids() []string {
	var out []string
	for _, c := range l.containers {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// on is what of l node n has on its host: its sandboxes and volumes (every
// one for the single daemon), and the snapshots.
func (l listed) on(n *node) listed {
	if n.id == "" {
		return l
	}
	mine := func(ids []string) []string {
		var out []string
		for _, id := range ids {
			if l.nodes[id] == n.id {
				out = append(out, id)
			}
		}
		return out
	}
	out := listed{running: mine(l.running), paused: mine(l.paused), snapshots: l.snapshots,
		volumes: mine(l.volumes), containers: map[string]string{}, nodes: l.nodes}
	for id, c := range l.containers {
		if l.nodes[id] == n.id {
			out.containers[id] = c
		}
	}
	return out
}

// String is what a before/after comparison compares.
func (l listed) String() string {
	return fmt.Sprint(l.running, l.paused, l.snapshots, l.volumes, l.nodes)
}

// account quiesces the run (no TTL left to expire, evictions in flight
// given time to end), stops every daemon with SIGTERM as an operator does,
// checks each host and the image store against what was listed, restarts
// the daemons and checks each lists the same.
func (r *run) account(n int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, sb := range r.live(ctx) {
		r.api().SetTimeout(ctx, sb.SandboxID, 10*time.Minute) // a paused one says 409: fine
	}
	r.waitBuilds(ctx)
	time.Sleep(time.Second)
	before := r.list(ctx, r.api())
	r.terminateAll()
	var cp problems
	entries, reclaimed := r.storedContent(&cp, before)
	for _, nd := range r.nodes {
		for _, p := range r.hostProblems(nd, before.on(nd)) {
			r.errorf("after round %d, %s stopped: %s", n, nd, p)
		}
	}
	for _, p := range cp {
		r.errorf("after round %d, stopped: %s", n, p)
	}
	r.restartAll()
	r.checkTemplates(fmt.Sprintf("after round %d, restarted", n))
	for _, p := range reclaimed() {
		r.errorf("after round %d: %s", n, p)
	}
	for _, nd := range r.nodes {
		if after := r.list(ctx, nd.c); before.String() != after.String() {
			r.errorf("after round %d: listed before the stop %v, by %s after the restart %v", n, before, nd, after)
		}
		for _, p := range r.eventually(func() []string { return r.eventLogProblems(ctx, nd, before) }) {
			r.errorf("after round %d, %s: %s", n, nd, p)
		}
	}
	r.serverErrors(n)
	r.traceFailures()
	r.t.Logf("after round %d: accounted for %d running, %d paused sandboxes, %d snapshots and %d content entries",
		n, len(before.running), len(before.paused), len(before.snapshots), entries)
}

// storedContent checks the stopped daemons' image store (local disk, or a
// cluster's bucket) against the records, and returns the check to run
// once they are restarted. It counts the content entries.
func (r *run) storedContent(p *problems, l listed) (int, func() []string) {
	if r.cl != nil {
		n := r.bucketProblems(p, l)
		return n, func() []string {
			user, builtin := r.templates(context.Background())
			return r.eventually(func() []string { return r.markerProblems(l, slices.Concat(user, builtin)) })
		}
	}
	content := r.contentProblems(p, false)
	return len(content), func() []string {
		if gone := r.reclaimedByRestart(content); len(gone) > 0 {
			return []string{fmt.Sprintf("content no record holds (leaked until the restart removed it): %v", gone)}
		}
		return nil
	}
}

// serverErrors logs the 5xx answers so far with the daemons' error lines;
// in a cluster, a 5xx other than a 503 with a message fails the test.
func (r *run) serverErrors(n int) {
	if r.cl == nil {
		if errs := r.stats.serverErrors(); len(errs) > 0 {
			r.t.Logf("after round %d: operations answered 5xx so far: %v; the daemon's errors:\n%s", n, errs, daemonErrors(r.nodes[0].d.DataDir))
		}
		return
	}
	bad, calm := r.stats.badServerErrors()
	if len(calm) > 0 {
		r.t.Logf("after round %d: 503s of rounds with no fault: %v", n, calm)
	}
	if len(bad) > 0 {
		r.errorf("after round %d: 5xx answers that are not a 503 saying why: %v; the nodes' errors:\n%s", n, bad, r.nodeErrors())
	}
}

// empty kills every sandbox and deletes every snapshot and user template,
// then checks the hosts and the image store hold nothing of them, with the
// daemons running and after they stop.
func (r *run) empty() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r.waitBuilds(ctx)
	r.nodes[0].d.KillAll()
	for _, s := range r.snapshots(ctx) {
		// A temporary snapshot goes with the last snapshot or sandbox that
		// used it: one listed may be gone by its turn (404).
		if err := r.api().DeleteSnapshot(ctx, s.SnapshotID); err != nil && outcome(err) != "404" {
			r.errorf("delete snapshot %s: %v", s.SnapshotID, err)
		}
	}
	for _, t := range r.userTemplates(ctx) {
		if err := r.api().DeleteTemplate(ctx, t.TemplateID); err != nil {
			r.errorf("delete template %s: %v", t.Names, err)
		}
	}
	for _, id := range r.list(ctx, r.api()).volumes {
		if err := r.api().DeleteVolume(ctx, id); err != nil {
			r.errorf("delete volume %s (no sandbox left to mount it): %v", id, err)
		}
	}
	_, builtin := r.templates(ctx)
	for _, p := range r.eventually(func() []string { return r.onlyBuiltins(builtin) }) {
		r.errorf("emptied, running: %s", p)
	}
	l := r.list(ctx, r.api())
	if len(l.running)+len(l.paused)+len(l.snapshots)+len(l.volumes) != 0 {
		r.errorf("after killing everything the daemons list %v", l)
	}
	for _, nd := range r.nodes {
		for _, p := range r.eventually(func() []string { return r.eventLogProblems(ctx, nd, l) }) {
			r.errorf("emptied, %s: %s", nd, p)
		}
	}
	r.terminateAll()
	r.emptiedStopped(l, builtin)
	r.traceFailures()
	r.restartAll() // for daemontest's Stop, which also fails on leftovers
}

// onlyBuiltins checks, with everything else gone, that the image store
// holds only the built-in templates' images.
func (r *run) onlyBuiltins(builtin []client.Template) []string {
	if r.cl != nil {
		return r.bucketEmptyProblems(builtin)
	}
	return r.onlyBuiltinContent(len(builtin))
}

// emptiedStopped checks the hosts and image store of the emptied run once
// its daemons stopped.
func (r *run) emptiedStopped(l listed, builtin []client.Template) {
	var cp problems
	if r.cl != nil {
		r.bucketProblems(&cp, l)
		cp = append(cp, r.bucketEmptyProblems(builtin)...)
	} else {
		r.contentProblems(&cp, true)
	}
	for _, nd := range r.nodes {
		r.ociProblems(&cp, nd)
		for _, p := range r.hostProblems(nd, l.on(nd)) {
			r.errorf("emptied, %s stopped: %s", nd, p)
		}
	}
	for _, p := range cp {
		r.errorf("emptied, stopped: %s", p)
	}
}

// list reads the sandboxes, snapshots and volumes through c; a failed
// listing fails the test (the daemons are meant to be quiet and up).
func (r *run) list(ctx context.Context, c *client.Client) listed {
	r.t.Helper()
	sbs, _, err := c.ListSandboxes(ctx, client.ListOptions{State: []string{"running", "paused"}, Limit: 100})
	if err != nil {
		r.t.Fatalf("list sandboxes: %v", err)
	}
	snaps, _, err := c.ListSnapshots(ctx, client.SnapshotListOptions{Limit: 100})
	if err != nil {
		r.t.Fatalf("list snapshots: %v", err)
	}
	l := listed{containers: map[string]string{}, nodes: map[string]string{}}
	for _, sb := range sbs {
		r.listSandbox(&l, sb)
	}
	for _, s := range snaps {
		l.snapshots = append(l.snapshots, s.SnapshotID)
	}
	vols, err := c.ListVolumes(ctx)
	if err != nil {
		r.t.Fatalf("list volumes: %v", err)
	}
	homes := r.volumeNodes(ctx)
	for _, v := range vols {
		l.volumes = append(l.volumes, v.ID)
		if r.cl != nil {
			l.nodes[v.ID] = homes[v.ID]
		}
	}
	slices.Sort(l.volumes)
	slices.Sort(l.running)
	slices.Sort(l.paused)
	slices.Sort(l.snapshots)
	return l
}

// listSandbox adds sb to l, with its node and, running, its container.
func (r *run) listSandbox(l *listed, sb client.SandboxInfo) {
	nd := r.ownerOf(sb)
	if r.cl != nil {
		l.nodes[sb.SandboxID] = sb.ClientID
	}
	if sb.State == "paused" {
		l.paused = append(l.paused, sb.SandboxID)
		return
	}
	l.running = append(l.running, sb.SandboxID)
	if nd == nil {
		r.errorf("running sandbox %s is on %q, no node of the run", sb.SandboxID, sb.ClientID)
		return
	}
	cid, err := daemonproc.ContainerOf(nd.d.DataDir, sb.SandboxID)
	if err != nil {
		r.errorf("running sandbox %s has no runtime handle on %s: %v", sb.SandboxID, nd, err)
		return
	}
	l.containers[sb.SandboxID] = cid
}

// eventLogProblems checks that each event log of node n is of a listed
// sandbox or of a dead one whose log is kept because it died on its own (a
// lost one's included). A single node's logs are the files on its disk; a
// cluster's are rows of the database (eventLogIDs).
func (r *run) eventLogProblems(ctx context.Context, n *node, l listed) []string {
	var problems []string
	ids, err := r.eventLogIDs(ctx, n)
	if err != nil {
		return []string{err.Error()}
	}
	for _, id := range ids {
		if slices.Contains(l.running, id) || slices.Contains(l.paused, id) {
			continue
		}
		info, err := r.api().GetSandbox(ctx, id)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("event log of %s, no known sandbox (%v)", id, err))
		case r.cl != nil && (info.State == "running" || info.State == "paused"):
			// Another node's.
		case info.KillReason == "":
			problems = append(problems, fmt.Sprintf("event log of sandbox %s, %s without dying on its own", id, info.State))
		}
	}
	return problems
}

// eventLogIDs lists the sandboxes with an event log: on node n's disk, or
// in a cluster's database those whose log has had no write for longer than
// a node waits before collecting a log (eventlog.SharedQuiet: a sandbox
// being made on a node logs before its record exists) and a collection
// takes.
func (r *run) eventLogIDs(ctx context.Context, n *node) ([]string, error) {
	if r.cl != nil {
		return r.cl.st.EventSandboxes(ctx, time.Now().Add(-eventlog.SharedQuiet-3*time.Second))
	}
	var ids []string
	for _, name := range dirNames(filepath.Join(n.d.DataDir, "events")) {
		if id, ok := strings.CutSuffix(name, ".jsonl"); ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// eventually returns check's problems once they persist for longer than
// the daemon's periodic collections take (10 sweeps of 200 ms).
func (r *run) eventually(check func() []string) []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		p := check()
		if len(p) == 0 || time.Now().After(deadline) {
			return p
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// dirNames lists a directory's entries, sorted (none if it is missing).
func dirNames(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// daemonErrors returns the error-level lines of the daemon's log (all its
// restarts write to the same file), so a 5xx comes with its cause.
func daemonErrors(dataDir string) string {
	b, err := os.ReadFile(filepath.Join(dataDir, "daemon.log"))
	if err != nil {
		return err.Error()
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, "level=ERROR") {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return strings.Join(out, "\n")
}
