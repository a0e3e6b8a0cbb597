package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	fspb "github.com/forkbox/forkbox/api/gen/filesystem"
	"github.com/forkbox/forkbox/internal/guest/agent"
)

func TestFilesystemRPCs(t *testing.T) {
	home := t.TempDir()
	ta := startAgent(t, agent.Config{DefaultWorkdir: home})
	ctx := context.Background()
	mustWrite(t, filepath.Join(home, "a.txt"), "hello")
	if err := os.Symlink("a.txt", filepath.Join(home, "link")); err != nil {
		t.Fatal(err)
	}

	st, err := ta.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: "a.txt"}))
	if err != nil {
		t.Fatal(err)
	}
	e := st.Msg.GetEntry()
	if e.GetPath() != filepath.Join(home, "a.txt") || e.GetSize() != 5 || e.GetType() != fspb.FileType_FILE_TYPE_FILE ||
		e.GetOwner() != "root" || e.GetPermissions() != "-rw-r--r--" || e.GetModifiedTime() == nil {
		t.Errorf("Stat(a.txt) = %v", e)
	}
	st, err = ta.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: filepath.Join(home, "link")}))
	if err != nil || st.Msg.GetEntry().GetSymlinkTarget() != filepath.Join(home, "a.txt") {
		t.Errorf("Stat(link) = %v, %v; want symlink target", st.Msg.GetEntry(), err)
	}

	errCases := []struct {
		name string
		call func() error
		code connect.Code
	}{
		{"stat missing", func() error {
			_, err := ta.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: "nope"}))
			return err
		}, connect.CodeNotFound},
		{"mkdir existing", func() error {
			_, err := ta.fs.MakeDir(ctx, connect.NewRequest(&fspb.MakeDirRequest{Path: home}))
			return err
		}, connect.CodeAlreadyExists},
		{"list a file", func() error {
			_, err := ta.fs.ListDir(ctx, connect.NewRequest(&fspb.ListDirRequest{Path: "a.txt"}))
			return err
		}, connect.CodeInvalidArgument},
		{"remove missing is idempotent", func() error {
			_, err := ta.fs.Remove(ctx, connect.NewRequest(&fspb.RemoveRequest{Path: "nope"}))
			return err
		}, 0}, // envd's remove succeeds too
		{"move missing", func() error {
			_, err := ta.fs.Move(ctx, connect.NewRequest(&fspb.MoveRequest{Source: "nope", Destination: "x"}))
			return err
		}, connect.CodeNotFound},
	}
	for _, tc := range errCases {
		err := tc.call()
		if tc.code == 0 && err != nil || tc.code != 0 && connect.CodeOf(err) != tc.code {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.code)
		}
	}
}

func TestMakeDirOwnedByUser(t *testing.T) {
	base := ownedDir(t, nobodyUID)
	ta := startAgent(t, agent.Config{})
	ctx := context.Background()
	dir := filepath.Join(base, "x", "y")
	resp, err := ta.fs.MakeDir(ctx, asUser(connect.NewRequest(&fspb.MakeDirRequest{Path: dir}), "nobody"))
	if err != nil {
		t.Fatal(err)
	}
	if e := resp.Msg.GetEntry(); e.GetType() != fspb.FileType_FILE_TYPE_DIRECTORY || e.GetOwner() != "nobody" {
		t.Errorf("MakeDir entry = %v, want a directory owned by nobody", e)
	}
	for _, d := range []string{filepath.Join(base, "x"), dir} {
		if uid := ownerUID(t, d); uid != nobodyUID {
			t.Errorf("%s owned by uid %d, want 65534", d, uid)
		}
	}
}

func TestListDirDepthMoveRemove(t *testing.T) {
	root := t.TempDir()
	ta := startAgent(t, agent.Config{})
	ctx := context.Background()
	mustWrite(t, filepath.Join(root, "f1"), "1")
	mustWrite(t, filepath.Join(root, "d1", "f2"), "2")
	mustWrite(t, filepath.Join(root, "d1", "d2", "f3"), "3")
	depths := []struct {
		depth uint32
		want  []string
	}{
		{0, []string{"d1", "f1"}},
		{1, []string{"d1", "f1"}},
		{2, []string{"d1", "d1/d2", "d1/f2", "f1"}},
		{3, []string{"d1", "d1/d2", "d1/d2/f3", "d1/f2", "f1"}},
	}
	for _, tc := range depths {
		resp, err := ta.fs.ListDir(ctx, connect.NewRequest(&fspb.ListDirRequest{Path: root, Depth: tc.depth}))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range resp.Msg.GetEntries() {
			rel, _ := filepath.Rel(root, e.GetPath())
			got = append(got, rel)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("depth %d: %v, want %v", tc.depth, got, tc.want)
		}
	}
	mv, err := ta.fs.Move(ctx, connect.NewRequest(&fspb.MoveRequest{
		Source: filepath.Join(root, "f1"), Destination: filepath.Join(root, "new", "f1moved")}))
	if err != nil || mv.Msg.GetEntry().GetName() != "f1moved" {
		t.Fatalf("Move: %v %v", mv, err)
	}
	if _, err := ta.fs.Remove(ctx, connect.NewRequest(&fspb.RemoveRequest{Path: filepath.Join(root, "d1")})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "d1")); !os.IsNotExist(err) {
		t.Fatalf("d1 still exists: %v", err)
	}
}

func TestWatchDir(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	ta := startAgent(t, agent.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := ta.fs.WatchDir(ctx, connect.NewRequest(&fspb.WatchDirRequest{Path: root, Recursive: true, IncludeEntry: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetStart() == nil {
		t.Fatalf("no start event: %v", stream.Err())
	}
	mustWrite(t, filepath.Join(root, "sub", "new.txt"), "x")
	for stream.Receive() {
		ev := stream.Msg().GetFilesystem()
		if ev.GetType() == fspb.EventType_EVENT_TYPE_CREATE && ev.GetName() == "sub/new.txt" {
			if ev.GetEntry().GetType() != fspb.FileType_FILE_TYPE_FILE {
				t.Errorf("create event entry = %v, want a file", ev.GetEntry())
			}
			return
		}
	}
	t.Fatalf("no create event for sub/new.txt: %v", stream.Err())
}

func TestPollingWatcher(t *testing.T) {
	root := t.TempDir()
	ta := startAgent(t, agent.Config{})
	ctx := context.Background()
	cw, err := ta.fs.CreateWatcher(ctx, connect.NewRequest(&fspb.CreateWatcherRequest{Path: root}))
	if err != nil {
		t.Fatal(err)
	}
	id := cw.Msg.GetWatcherId()
	mustWrite(t, filepath.Join(root, "polled"), "x")
	var names []string
	waitFor(t, func() bool {
		resp, err := ta.fs.GetWatcherEvents(ctx, connect.NewRequest(&fspb.GetWatcherEventsRequest{WatcherId: id}))
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range resp.Msg.GetEvents() {
			names = append(names, ev.GetName())
		}
		return slices.Contains(names, "polled")
	})
	if _, err := ta.fs.RemoveWatcher(ctx, connect.NewRequest(&fspb.RemoveWatcherRequest{WatcherId: id})); err != nil {
		t.Fatal(err)
	}
	_, err = ta.fs.GetWatcherEvents(ctx, connect.NewRequest(&fspb.GetWatcherEventsRequest{WatcherId: id}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("events of removed watcher: %v, want not_found", err)
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ownerUID(t *testing.T, path string) uint32 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid
}

// nobodyUID is the uid of the host's "nobody", the unprivileged account the
// tests act as.
const nobodyUID = 65534

// ownedDir makes a fresh directory owned by uid in /tmp (t.TempDir's
// directories sit in a root-only parent, which other users cannot search).
func ownedDir(t *testing.T, uid int) string {
	t.Helper()
	return ownedDirIn(t, "", uid)
}

// ownedDirIn is ownedDir in parent ("" = the default temporary directory).
func ownedDirIn(t *testing.T, parent string, uid int) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, "agent-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	return dir
}
