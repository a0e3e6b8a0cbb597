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
)

// listed is what the daemon lists: sandboxes by state, snapshots.
type listed struct {
	running, paused []string
	snapshots       []string
	volumes         []string
	// containers maps each running sandbox to its runsc container id.
	containers map[string]string
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

// account quiesces the daemon (no TTL left to expire, evictions in flight
// given time to end), stops it with SIGTERM as an operator does, checks the
// host against what it listed, restarts it and checks it lists the same.
func (r *run) account(n int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, sb := range r.live(ctx) {
		r.c.SetTimeout(ctx, sb.SandboxID, 10*time.Minute) // a paused one says 409: fine
	}
	r.waitBuilds(ctx)
	time.Sleep(time.Second)
	before := r.list(ctx)
	r.d.Terminate()
	var cp problems
	content := r.contentProblems(&cp, false)
	for _, p := range append(r.hostProblems(before), cp...) {
		r.t.Errorf("after round %d, daemon stopped: %s", n, p)
	}
	r.d.Restart()
	r.checkTemplates(fmt.Sprintf("after round %d, daemon restarted", n))
	r.connect()
	if gone := r.reclaimedByRestart(content); len(gone) > 0 {
		r.t.Errorf("after round %d: content no record holds (leaked until the restart removed it): %v", n, gone)
	}
	after := r.list(ctx)
	if fmt.Sprint(before.running, before.paused, before.snapshots, before.volumes) != fmt.Sprint(after.running, after.paused, after.snapshots, after.volumes) {
		r.t.Errorf("after round %d: listed before the stop %+v, after the restart %+v", n, before, after)
	}
	for _, p := range r.eventually(func() []string { return r.eventLogProblems(ctx, after) }) {
		r.t.Errorf("after round %d: %s", n, p)
	}
	if errs := r.stats.serverErrors(); len(errs) > 0 {
		r.t.Logf("after round %d: operations answered 5xx so far: %v; the daemon's errors:\n%s", n, errs, daemonErrors(r.d.DataDir))
	}
	r.t.Logf("after round %d: accounted for %d running, %d paused sandboxes, %d snapshots and %d content entries",
		n, len(before.running), len(before.paused), len(before.snapshots), len(content))
}

// empty kills every sandbox and deletes every snapshot and user template,
// then checks the host holds nothing of them, with the daemon running and
// after it stops.
func (r *run) empty() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r.waitBuilds(ctx)
	r.d.KillAll()
	for _, s := range r.snapshots(ctx) {
		// A temporary snapshot goes with the last snapshot or sandbox that
		// used it: one listed may be gone by its turn (404).
		if err := r.c.DeleteSnapshot(ctx, s.SnapshotID); err != nil && outcome(err) != "404" {
			r.t.Errorf("delete snapshot %s: %v", s.SnapshotID, err)
		}
	}
	for _, t := range r.userTemplates(ctx) {
		if err := r.c.DeleteTemplate(ctx, t.TemplateID); err != nil {
			r.t.Errorf("delete template %s: %v", t.Names, err)
		}
	}
	for _, id := range r.list(ctx).volumes {
		if err := r.c.DeleteVolume(ctx, id); err != nil {
			r.t.Errorf("delete volume %s (no sandbox left to mount it): %v", id, err)
		}
	}
	_, builtin := r.templates(ctx)
	builtins := len(builtin)
	for _, p := range r.eventually(func() []string { return r.onlyBuiltinContent(builtins) }) {
		r.t.Errorf("emptied, daemon running: %s", p)
	}
	l := r.list(ctx)
	if len(l.running)+len(l.paused)+len(l.snapshots)+len(l.volumes) != 0 {
		r.t.Errorf("after killing everything the daemon lists %+v", l)
	}
	for _, p := range r.eventually(func() []string { return r.eventLogProblems(ctx, l) }) {
		r.t.Errorf("emptied: %s", p)
	}
	r.d.Terminate()
	var cp problems
	r.contentProblems(&cp, true)
	r.ociProblems(&cp)
	for _, p := range append(r.hostProblems(l), cp...) {
		r.t.Errorf("emptied, daemon stopped: %s", p)
	}
	r.d.Restart() // for daemontest's Stop, which also fails on leftovers
	r.connect()
}

// list reads the daemon's sandboxes and snapshots; a failed listing fails
// the test (the daemon is meant to be quiet and up).
func (r *run) list(ctx context.Context) listed {
	r.t.Helper()
	sbs, _, err := r.c.ListSandboxes(ctx, client.ListOptions{State: []string{"running", "paused"}, Limit: 100})
	if err != nil {
		r.t.Fatalf("list sandboxes: %v", err)
	}
	snaps, _, err := r.c.ListSnapshots(ctx, client.SnapshotListOptions{Limit: 100})
	if err != nil {
		r.t.Fatalf("list snapshots: %v", err)
	}
	l := listed{containers: map[string]string{}}
	for _, sb := range sbs {
		if sb.State == "paused" {
			l.paused = append(l.paused, sb.SandboxID)
			continue
		}
		l.running = append(l.running, sb.SandboxID)
		cid, err := daemonproc.ContainerOf(r.d.DataDir, sb.SandboxID)
		if err != nil {
			r.t.Errorf("running sandbox %s has no runtime handle: %v", sb.SandboxID, err)
			continue
		}
		l.containers[sb.SandboxID] = cid
	}
	for _, s := range snaps {
		l.snapshots = append(l.snapshots, s.SnapshotID)
	}
	vols, err := r.c.ListVolumes(ctx)
	if err != nil {
		r.t.Fatalf("list volumes: %v", err)
	}
	for _, v := range vols {
		l.volumes = append(l.volumes, v.ID)
	}
	slices.Sort(l.volumes)
	slices.Sort(l.running)
	slices.Sort(l.paused)
	slices.Sort(l.snapshots)
	return l
}

// eventLogProblems checks that each event log on disk is of a listed
// sandbox or of a dead one whose log is kept because it died on its own.
func (r *run) eventLogProblems(ctx context.Context, l listed) []string {
	var problems []string
	for _, name := range dirNames(filepath.Join(r.d.DataDir, "events")) {
		id, ok := strings.CutSuffix(name, ".jsonl")
		if !ok || slices.Contains(l.running, id) || slices.Contains(l.paused, id) {
			continue
		}
		info, err := r.c.GetSandbox(ctx, id)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("event log %s of no known sandbox (%v)", name, err))
		case info.KillReason == "":
			problems = append(problems, fmt.Sprintf("event log %s of sandbox %s, %s without dying on its own", name, id, info.State))
		}
	}
	return problems
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
