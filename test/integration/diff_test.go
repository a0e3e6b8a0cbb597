package integration

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
)

// home keeps the diffs of these tests to the files they write.
var home = client.DiffOptions{Paths: []string{"/home/user"}}

// changeSummary lists changes as "kind path [what]", sorted.
func changeSummary(cs []client.FileChange) []string {
	var out []string
	for _, c := range cs {
		s := c.Kind[:1] + " " + c.Path
		if len(c.What) > 0 {
			s += " " + strings.Join(c.What, ",")
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func wantChanges(t *testing.T, what string, got []client.FileChange, want ...string) {
	t.Helper()
	sort.Strings(want)
	if s := changeSummary(got); !slices.Equal(s, want) {
		t.Errorf("%s:\n  got  %q\n  want %q", what, s, want)
	}
}

func diffAll(t *testing.T, ctx context.Context, c *client.Client, id string, o client.DiffOptions) []client.FileChange {
	t.Helper()
	start := time.Now()
	cs, err := c.DiffAll(ctx, id, o)
	if err != nil {
		t.Fatalf("diff %s: %v", id, err)
	}
	t.Logf("diff %s against %q: %d changes in %s", id, o.Against, len(cs), time.Since(start))
	return cs
}

// TestDiffAndApply: a fork's edits, additions, deletions, mode, symlink
// and metadata changes are what its diff lists; applying it into its
// parent brings exactly those, leaves the parent's own files, reports a
// conflicting edit and leaves it, or takes it with strategy theirs.
func TestDiffAndApply(t *testing.T) {
	ctx := daemontestContext(t)
	_, c := start(t)
	src := create(t, ctx, c, client.CreateOptions{})
	sconn := src.Conn()
	for f, body := range map[string]string{"shared.txt": "base\n", "gone.txt": "bye\n", "script.sh": "echo hi\n", "meta.txt": "m", "conflict.txt": "v0\n"} {
		writeFile(t, ctx, sconn, "/home/user/"+f, body)
	}
	forks, err := c.Fork(ctx, src.SandboxID, 1, 0)
	if err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Fatalf("fork: %v %+v", err, forks)
	}
	f1 := forks[0].Sandbox
	fconn := f1.Conn()
	writeFile(t, ctx, fconn, "/home/user/added.txt", "new file\n")
	if err := fconn.WriteFile(ctx, "/home/user/blob.bin", []byte{0, 1, 2, 0xff}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, ctx, fconn, "/home/user/shared.txt", "base\nedited by the fork\n")
	writeFile(t, ctx, fconn, "/home/user/conflict.txt", "theirs\n")
	sh(t, ctx, fconn, "rm /home/user/gone.txt && chmod 755 /home/user/script.sh && ln -s added.txt /home/user/link")
	if _, err := fconn.WriteFileWithMetadata(ctx, "/home/user/meta.txt", strings.NewReader("m"), map[string]string{"owner": "agent-1"}); err != nil {
		t.Fatal(err)
	}

	got := diffAll(t, ctx, c, f1.SandboxID, home)
	wantChanges(t, "fork's diff against its parent", got,
		"a /home/user/added.txt", "a /home/user/blob.bin", "a /home/user/link",
		"m /home/user/shared.txt content", "m /home/user/conflict.txt content", "d /home/user/gone.txt",
		"m /home/user/script.sh mode", "m /home/user/meta.txt xattrs")
	patch, _, err := c.DiffPatch(ctx, f1.SandboxID, home)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"+++ b/home/user/added.txt", "+edited by the fork", "Binary files /dev/null and b/home/user/blob.bin differ", "new mode 0755"} {
		if !strings.Contains(patch, want) {
			t.Errorf("patch lacks %q:\n%s", want, patch)
		}
	}

	// The parent changes its own files and the conflicting one.
	writeFile(t, ctx, sconn, "/home/user/own.txt", "parent's\n")
	writeFile(t, ctx, sconn, "/home/user/conflict.txt", "ours\n")
	res, err := c.Apply(ctx, src.SandboxID, client.ApplyOptions{From: f1.SandboxID})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	t.Logf("apply: %d applied, %d conflicts, base %s, %d ms", len(res.Applied), len(res.Conflicts), res.Base, res.TookMs)
	if len(res.Conflicts) != 1 || res.Conflicts[0].Path != "/home/user/conflict.txt" {
		t.Errorf("conflicts %+v", res.Conflicts)
	}
	checkApplied(t, ctx, sconn)
	if got := readFile(t, ctx, sconn, "/home/user/conflict.txt"); got != "ours\n" {
		t.Errorf("conflicting file = %q, want it left as ours", got)
	}
	res, err = c.Apply(ctx, src.SandboxID, client.ApplyOptions{From: f1.SandboxID, Paths: []string{"/home/user/conflict.txt"}, Strategy: client.StrategyTheirs})
	if err != nil || len(res.Applied) != 1 {
		t.Fatalf("apply theirs: %v %+v", err, res)
	}
	if got := readFile(t, ctx, sconn, "/home/user/conflict.txt"); got != "theirs\n" {
		t.Errorf("conflict with theirs = %q", got)
	}
	// Nothing left: the parent now has every change of the fork.
	if res, err := c.Apply(ctx, src.SandboxID, client.ApplyOptions{From: f1.SandboxID}); err != nil || len(res.Applied)+len(res.Conflicts) != 0 {
		t.Errorf("second apply: %v %+v", err, res)
	}
	checkDiffErrors(t, ctx, c, src.SandboxID, f1.SandboxID)
}

// checkApplied: the fork's changes are in the parent, its own file kept.
func checkApplied(t *testing.T, ctx context.Context, conn *client.SandboxConn) {
	t.Helper()
	for f, want := range map[string]string{"added.txt": "new file\n", "shared.txt": "base\nedited by the fork\n", "own.txt": "parent's\n", "link": "new file\n"} {
		if got := readFile(t, ctx, conn, "/home/user/"+f); got != want {
			t.Errorf("%s after apply = %q, want %q", f, got, want)
		}
	}
	out := sh(t, ctx, conn, "cd /home/user && stat -c '%a %U' script.sh && readlink link && od -An -tx1 blob.bin && getfattr --only-values -n user.e2b.owner meta.txt 2>/dev/null || python3 -c 'import os; print(os.getxattr(\"meta.txt\", \"user.e2b.owner\").decode())'; test -e gone.txt && echo gone-still-there || true")
	for _, want := range []string{"755 user", "added.txt", "00 01 02 ff", "agent-1"} {
		if !strings.Contains(out, want) {
			t.Errorf("after apply: %q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "gone-still-there") {
		t.Error("a file the fork deleted is still in the parent")
	}
}

// checkDiffErrors: unknown ids 404, escapes and bad strategies 400.
func checkDiffErrors(t *testing.T, ctx context.Context, c *client.Client, id, other string) {
	t.Helper()
	if _, err := c.Diff(ctx, "nosuchsandbox0000000", client.DiffOptions{}); !client.IsNotFound(err) {
		t.Errorf("diff of an unknown id: %v, want 404", err)
	}
	if _, err := c.Diff(ctx, id, client.DiffOptions{Against: "nosuchsnapshot000000"}); !client.IsNotFound(err) {
		t.Errorf("diff against an unknown id: %v, want 404", err)
	}
	for _, o := range []client.DiffOptions{{Paths: []string{"/../etc"}}, {Paths: []string{"etc"}}} {
		var e *client.Error
		if _, err := c.Diff(ctx, id, o); !asError(err, &e) || e.Code != 400 {
			t.Errorf("diff %+v: %v, want 400", o, err)
		}
	}
	for _, o := range []client.ApplyOptions{{From: id}, {From: other, Base: id}, {From: other, Strategy: "mine"}, {From: other, Paths: []string{"/../x"}}} {
		var e *client.Error
		if _, err := c.Apply(ctx, id, o); !asError(err, &e) || e.Code != 400 {
			t.Errorf("apply %+v: %v, want 400", o, err)
		}
	}
	if _, err := c.Apply(ctx, id, client.ApplyOptions{From: "nosuchsandbox0000000"}); !client.IsNotFound(err) {
		t.Errorf("apply from an unknown id: %v, want 404", err)
	}
}

// TestDiffSnapshotsPausedRollback: snapshots diff against each other from
// their file lists; a paused sandbox diffs from its image and applies
// after resume; a snapshot taken before a rollback applies its files back.
func TestDiffSnapshotsPausedRollback(t *testing.T) {
	ctx := daemontestContext(t)
	_, c := start(t)
	sb := create(t, ctx, c, client.CreateOptions{})
	conn := sb.Conn()
	writeFile(t, ctx, conn, "/home/user/a.txt", "one\n")
	r, err := c.Snapshot(ctx, sb.SandboxID, "")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, ctx, conn, "/home/user/a.txt", "two\n")
	writeFile(t, ctx, conn, "/home/user/later.txt", "after r\n")
	s0, err := c.Snapshot(ctx, sb.SandboxID, "")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	d, err := c.DiffSnapshot(ctx, s0.SnapshotID, client.DiffOptions{Against: r.SnapshotID, Paths: home.Paths})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot diff: %s", time.Since(t0))
	wantChanges(t, "snapshot against snapshot", d.Changes, "m /home/user/a.txt content", "a /home/user/later.txt")
	if d, err := c.DiffSnapshot(ctx, s0.SnapshotID, home); err != nil || d.Against != r.SnapshotID {
		t.Errorf("a snapshot's default against = %+v %v, want the snapshot before it (%s)", d, err, r.SnapshotID)
	}

	// Paused: diffed from its image, applied into after resume.
	if err := c.Pause(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool { return state(t, ctx, c, sb.SandboxID) == "paused" })
	wantChanges(t, "paused sandbox against s0", diffAll(t, ctx, c, sb.SandboxID, client.DiffOptions{Against: s0.SnapshotID, Paths: home.Paths}))
	if _, err := c.Apply(ctx, sb.SandboxID, client.ApplyOptions{From: r.SnapshotID}); !client.IsConflict(err) {
		t.Errorf("apply into a paused sandbox: %v, want 409", err)
	}
	if _, err := c.Connect(ctx, sb.SandboxID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Rollback(ctx, sb.SandboxID, r.SnapshotID); err != nil {
		t.Fatal(err)
	}
	conn = sb.Conn()
	if got := readFile(t, ctx, conn, "/home/user/a.txt"); got != "one\n" {
		t.Fatalf("after rollback a.txt = %q", got)
	}
	res, err := c.Apply(ctx, sb.SandboxID, client.ApplyOptions{From: s0.SnapshotID})
	if err != nil {
		t.Fatalf("apply a snapshot taken before the rollback: %v", err)
	}
	if res.Base != r.SnapshotID || len(res.Conflicts) != 0 {
		t.Errorf("apply from s0: base %s conflicts %+v, want base %s", res.Base, res.Conflicts, r.SnapshotID)
	}
	for f, want := range map[string]string{"a.txt": "two\n", "later.txt": "after r\n"} {
		if got := readFile(t, ctx, conn, "/home/user/"+f); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
}

// TestApplyAllOrNothing: an apply the target's disk cannot hold fails
// with 409 and leaves every file as it was, nothing staged behind.
func TestApplyAllOrNothing(t *testing.T) {
	ctx := daemontestContext(t)
	_, c := start(t)
	src := create(t, ctx, c, client.CreateOptions{DiskSizeMB: 128})
	writeFile(t, ctx, src.Conn(), "/home/user/a.txt", "base\n")
	forks, err := c.Fork(ctx, src.SandboxID, 2, 0)
	if err != nil || len(forks) != 2 || forks[0].Sandbox == nil || forks[1].Sandbox == nil {
		t.Fatalf("fork: %v %+v", err, forks)
	}
	target, from := forks[0].Sandbox.Conn(), forks[1].Sandbox
	sh(t, ctx, target, "head -c 100M /dev/zero > /home/user/filler")
	writeFile(t, ctx, from.Conn(), "/home/user/a.txt", "from\n")
	sh(t, ctx, from.Conn(), "head -c 40M /dev/zero > /home/user/big.bin")
	_, err = c.Apply(ctx, forks[0].Sandbox.SandboxID, client.ApplyOptions{From: from.SandboxID})
	if !client.IsConflict(err) {
		t.Fatalf("apply past the target's disk: %v, want 409", err)
	}
	t.Logf("apply refused: %v", err)
	if got := readFile(t, ctx, target, "/home/user/a.txt"); got != "base\n" {
		t.Errorf("a.txt after a failed apply = %q, want base", got)
	}
	if out := sh(t, ctx, target, "ls -a / /home/user | grep forkbox-apply || true"); out != "" {
		t.Errorf("left behind: %s", out)
	}
	if st := state(t, ctx, c, forks[0].Sandbox.SandboxID); st != "running" {
		t.Errorf("target is %s after a failed apply", st)
	}
}

// TestDiffUnrelatedLineages: sandboxes of two templates are diffed as
// whole trees, a page at a time; an apply between them needs a base.
func TestDiffUnrelatedLineages(t *testing.T) {
	ctx := daemontestContext(t)
	_, c := start(t)
	a := create(t, ctx, c, client.CreateOptions{})
	b := create(t, ctx, c, client.CreateOptions{TemplateID: "code-interpreter-v1"})
	t0 := time.Now()
	d, err := c.Diff(ctx, b.SandboxID, client.DiffOptions{Against: a.SandboxID, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first page of the diff of two templates' sandboxes: %d changes in %s, next %q", len(d.Changes), time.Since(t0), d.Next)
	t0 = time.Now()
	if _, err := c.Diff(ctx, b.SandboxID, client.DiffOptions{Against: a.SandboxID, Limit: 50, Cursor: d.Next}); err != nil {
		t.Fatal(err)
	}
	t.Logf("second page: %s", time.Since(t0))
	if len(d.Changes) != 50 || d.Next == "" {
		t.Errorf("page of %d changes, next %q: want a full page and more", len(d.Changes), d.Next)
	}
	if _, err := c.Apply(ctx, a.SandboxID, client.ApplyOptions{From: b.SandboxID}); err == nil || !strings.Contains(err.Error(), "share no ancestor") {
		t.Errorf("apply across lineages without a base: %v, want a 400 naming it", err)
	}
}
