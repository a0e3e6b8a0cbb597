package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

func testLifecycle(s *suite) {
	ctx := context.Background()
	id := NewID()
	info, ready := s.create(id)
	s.t.Logf("timing: %s create → first answer %v", s.rt.Name(), ready)
	if info.ID != id || info.State != runtime.StateRunning {
		s.t.Fatalf("Create returned %+v", info)
	}
	s.wantState(id, runtime.StateRunning)
	list, err := s.rt.List(ctx)
	if err != nil || !slices.ContainsFunc(list, func(i runtime.Info) bool { return i.ID == id }) {
		s.t.Fatalf("List = %v, %v; want it to contain %s", list, err, id)
	}
	if got := s.mustGet(id, "/count"); got != "1" {
		s.t.Fatalf("first /count = %q", got)
	}
	st, err := s.rt.Stats(ctx, id)
	if err != nil || st.MemoryBytes == 0 {
		s.t.Fatalf("Stats = %+v, %v; want nonzero memory", st, err)
	}
	start := time.Now()
	if err := s.rt.Freeze(ctx, id); err != nil {
		s.t.Fatalf("Freeze: %v", err)
	}
	s.t.Logf("timing: %s freeze %v", s.rt.Name(), time.Since(start))
	s.wantState(id, runtime.StatePaused)
	start = time.Now()
	if err := s.rt.Thaw(ctx, id); err != nil {
		s.t.Fatalf("Thaw: %v", err)
	}
	s.t.Logf("timing: %s thaw %v", s.rt.Name(), time.Since(start))
	s.wantState(id, runtime.StateRunning)
	if got := s.mustGet(id, "/count"); got != "2" {
		s.t.Fatalf("/count after thaw = %q", got)
	}
	start = time.Now()
	if err := s.rt.Delete(ctx, id); err != nil {
		s.t.Fatalf("Delete: %v", err)
	}
	s.t.Logf("timing: %s delete %v", s.rt.Name(), time.Since(start))
	s.wantGone(id)
	if err := s.rt.Delete(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
		s.t.Fatalf("second Delete: %v, want ErrNotFound", err)
	}
}

func testDuplicate(s *suite) {
	id := NewID()
	s.create(id)
	if _, err := s.rt.Create(context.Background(), s.spec(id)); !errors.Is(err, errdefs.ErrAlreadyExists) {
		s.t.Fatalf("duplicate Create: %v, want ErrAlreadyExists", err)
	}
	s.wantState(id, runtime.StateRunning)
	if got := s.mustGet(id, "/count"); got != "1" {
		s.t.Fatalf("/count after duplicate create = %q", got)
	}
}

func testUnknown(s *suite) {
	ctx := context.Background()
	id := NewID()
	calls := map[string]func() error{
		"Info":   func() error { _, err := s.rt.Info(ctx, id); return err },
		"Delete": func() error { return s.rt.Delete(ctx, id) },
		"Dial":   func() error { _, err := s.rt.Dial(ctx, id, s.opts.Port); return err },
		"Stats":  func() error { _, err := s.rt.Stats(ctx, id); return err },
		"Freeze": func() error { return s.rt.Freeze(ctx, id) },
		"Thaw":   func() error { return s.rt.Thaw(ctx, id) },
		"Checkpoint": func() error {
			return s.checkpointer().Checkpoint(ctx, id, s.t.TempDir(), runtime.CheckpointOptions{})
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, errdefs.ErrNotFound) {
			s.t.Errorf("%s of unknown id: %v, want ErrNotFound", name, err)
		}
	}
}

func testCreateFailure(s *suite) {
	ctx := context.Background()
	bad := []struct {
		name string
		spec runtime.Spec
		want error
	}{
		{"short id", runtime.Spec{ID: "short", RootFS: s.opts.RootFS, Args: s.opts.Args}, errdefs.ErrInvalidArgument},
		{"missing rootfs", runtime.Spec{ID: NewID(), RootFS: "/nonexistent/rootfs", Args: s.opts.Args}, errdefs.ErrInvalidArgument},
	}
	if s.opts.FailArgs != nil {
		spec := s.spec(NewID())
		spec.Args = s.opts.FailArgs
		bad = append(bad, struct {
			name string
			spec runtime.Spec
			want error
		}{"failing first process", spec, nil})
	}
	for _, b := range bad {
		_, err := s.rt.Create(ctx, b.spec)
		if err == nil {
			s.t.Errorf("%s: Create succeeded", b.name)
			s.rt.Delete(ctx, b.spec.ID)
			continue
		}
		if b.want != nil && !errors.Is(err, b.want) {
			s.t.Errorf("%s: Create: %v, want %v", b.name, err, b.want)
		}
		if len(b.spec.ID) == runtime.IDLength {
			s.wantGone(b.spec.ID)
		}
	}
	// The same id works after a failure.
	if s.opts.FailArgs != nil {
		s.create(bad[len(bad)-1].spec.ID)
	}
}

func testIsolation(s *suite) {
	a, b := NewID(), NewID()
	s.create(a)
	infoB, _ := s.create(b)
	if !infoB.Addr.IsValid() {
		return // a backend without addresses has nothing to isolate
	}
	addr := fmt.Sprintf("%s:%d", infoB.Addr, s.opts.Port)
	if got := s.mustGet(a, "/probe?addr="+addr); got != "closed" {
		s.t.Fatalf("sandbox %s reaches sandbox %s at %s: %q", a, b, addr, got)
	}
	if procs := strings.Fields(s.mustGet(a, "/procs")); len(procs) > 10 {
		s.t.Fatalf("sandbox sees %d processes: %v", len(procs), procs)
	}
}

func testClone(s *suite) {
	ctx := context.Background()
	src, clone := NewID(), NewID()
	s.create(src)
	for i := 1; i <= 3; i++ {
		s.mustGet(src, "/count")
	}
	img := s.t.TempDir()
	start := time.Now()
	err := s.checkpointer().Checkpoint(ctx, src, img, runtime.CheckpointOptions{LeaveRunning: true})
	if err != nil {
		s.t.Fatalf("Checkpoint --leave-running: %v", err)
	}
	s.t.Logf("timing: %s checkpoint --leave-running %v", s.rt.Name(), time.Since(start))
	s.wantState(src, runtime.StateRunning)
	if got := s.mustGet(src, "/count"); got != "4" {
		s.t.Fatalf("source /count after checkpoint = %q, want 4", got)
	}
	start = time.Now()
	spec := s.spec(clone)
	spec.Hostname = "clone"
	if _, err := s.checkpointer().Restore(ctx, spec, img); err != nil {
		s.t.Fatalf("Restore as %s: %v", clone, err)
	}
	s.deleteLater(clone)
	s.waitReady(clone)
	s.t.Logf("timing: %s restore → first answer %v", s.rt.Name(), time.Since(start))
	s.wantState(clone, runtime.StateRunning)
	if got := s.mustGet(clone, "/count"); got != "4" {
		s.t.Fatalf("clone /count = %q, want 4 (state of the checkpoint)", got)
	}
	if got := s.mustGet(src, "/count"); got != "5" {
		s.t.Fatalf("source /count after clone = %q, want 5", got)
	}
	if _, err := s.checkpointer().Restore(ctx, s.spec(src), img); !errors.Is(err, errdefs.ErrAlreadyExists) {
		s.t.Fatalf("Restore over a running sandbox: %v, want ErrAlreadyExists", err)
	}
}

func testStopRestore(s *suite) {
	ctx := context.Background()
	id := NewID()
	s.create(id)
	s.mustGet(id, "/count")
	s.mustGet(id, "/count")
	img := s.t.TempDir()
	if err := s.checkpointer().Checkpoint(ctx, id, img, runtime.CheckpointOptions{}); err != nil {
		s.t.Fatalf("Checkpoint: %v", err)
	}
	s.wantState(id, runtime.StateStopped)
	start := time.Now()
	if _, err := s.checkpointer().Restore(ctx, s.spec(id), img); err != nil {
		s.t.Fatalf("Restore in place: %v", err)
	}
	s.waitReady(id)
	s.t.Logf("timing: %s restore in place → first answer %v", s.rt.Name(), time.Since(start))
	if got := s.mustGet(id, "/count"); got != "3" {
		s.t.Fatalf("/count after restore = %q, want 3", got)
	}
	// Rollback: delete and restore the same id from the same image.
	start = time.Now()
	if err := s.rt.Delete(ctx, id); err != nil {
		s.t.Fatalf("Delete: %v", err)
	}
	if _, err := s.checkpointer().Restore(ctx, s.spec(id), img); err != nil {
		s.t.Fatalf("Restore after Delete: %v", err)
	}
	s.waitReady(id)
	s.t.Logf("timing: %s rollback (delete + restore) → first answer %v", s.rt.Name(), time.Since(start))
	if got := s.mustGet(id, "/count"); got != "3" {
		s.t.Fatalf("/count after rollback = %q, want 3", got)
	}
}

// testReplace rolls a running sandbox back in place: the same id answers
// with the checkpoint's state; replacing an unknown id is ErrNotFound.
func testReplace(s *suite) {
	ctx := context.Background()
	id := NewID()
	s.create(id)
	s.mustGet(id, "/count")
	img := s.t.TempDir()
	if err := s.checkpointer().Checkpoint(ctx, id, img, runtime.CheckpointOptions{LeaveRunning: true}); err != nil {
		s.t.Fatalf("Checkpoint: %v", err)
	}
	s.mustGet(id, "/count")
	s.mustGet(id, "/count")
	start := time.Now()
	if _, err := s.checkpointer().Replace(ctx, s.spec(id), img); err != nil {
		s.t.Fatalf("Replace: %v", err)
	}
	s.waitReady(id)
	s.t.Logf("timing: %s replace → first answer %v", s.rt.Name(), time.Since(start))
	s.wantState(id, runtime.StateRunning)
	if got := s.mustGet(id, "/count"); got != "2" {
		s.t.Fatalf("/count after Replace = %q, want 2 (the checkpoint's 1, plus this call)", got)
	}
	if list, _ := s.rt.List(ctx); len(list) != 1 {
		s.t.Errorf("List after Replace: %+v, want one sandbox", list)
	}
	if _, err := s.checkpointer().Replace(ctx, s.spec(NewID()), img); !errdefs.IsNotFound(err) {
		s.t.Errorf("Replace of an unknown id: %v, want ErrNotFound", err)
	}
}

// testFilesystemSave saves only a sandbox's files and cold-boots it from
// them: files written come back, the first process starts afresh. (Not
// under /tmp: gVisor mounts its own tmpfs there when the template's /tmp is
// empty, and that is not part of the root filesystem.)
func testFilesystemSave(s *suite) {
	fsr, ok := s.rt.(runtime.FilesystemSaver)
	if !ok {
		s.t.Fatalf("%s does not implement runtime.FilesystemSaver", s.rt.Name())
	}
	ctx := context.Background()
	id := NewID()
	s.create(id)
	s.mustGet(id, "/count")
	s.mustGet(id, "/write?path=/root/kept.txt&data=hello")
	img := s.t.TempDir()
	start := time.Now()
	if err := fsr.SaveFilesystem(ctx, id, img); err != nil {
		s.t.Fatalf("SaveFilesystem: %v", err)
	}
	s.t.Logf("timing: %s save filesystem %v", s.rt.Name(), time.Since(start))
	s.wantState(id, runtime.StateRunning)
	if err := s.rt.Delete(ctx, id); err != nil {
		s.t.Fatalf("Delete: %v", err)
	}
	start = time.Now()
	if _, err := fsr.CreateFromFilesystem(ctx, s.spec(id), img); err != nil {
		s.t.Fatalf("CreateFromFilesystem: %v", err)
	}
	s.waitReady(id)
	s.t.Logf("timing: %s create from filesystem → first answer %v", s.rt.Name(), time.Since(start))
	if got := s.mustGet(id, "/read?path=/root/kept.txt"); got != "hello" {
		s.t.Errorf("file after the cold boot = %q, want hello", got)
	}
	if got := s.mustGet(id, "/count"); got != "1" {
		s.t.Errorf("/count after the cold boot = %q, want 1 (a fresh process)", got)
	}
	// A sandbox booted from saved files checkpoints and restores as any.
	mem := s.t.TempDir()
	if err := s.checkpointer().Checkpoint(ctx, id, mem, runtime.CheckpointOptions{}); err != nil {
		s.t.Fatalf("Checkpoint of a sandbox booted from files: %v", err)
	}
	if _, err := s.checkpointer().Restore(ctx, s.spec(id), mem); err != nil {
		s.t.Fatalf("Restore of a sandbox booted from files: %v", err)
	}
	s.waitReady(id)
	if got := s.mustGet(id, "/count"); got != "2" {
		s.t.Errorf("/count after its restore = %q, want 2", got)
	}
	// A second sandbox from the same saved files.
	other := NewID()
	if _, err := fsr.CreateFromFilesystem(ctx, s.spec(other), img); err != nil {
		s.t.Fatalf("CreateFromFilesystem of a second sandbox: %v", err)
	}
	s.deleteLater(other)
	s.waitReady(other)
	if got := s.mustGet(other, "/read?path=/root/kept.txt"); got != "hello" {
		s.t.Errorf("file in the second sandbox = %q", got)
	}
	if _, err := fsr.CreateFromFilesystem(ctx, s.spec(NewID()), s.t.TempDir()); !errdefs.IsInvalidArgument(err) {
		s.t.Errorf("CreateFromFilesystem of an empty dir: %v, want ErrInvalidArgument", err)
	}
}
