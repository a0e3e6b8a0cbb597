package sandbox

import (
	"context"
	"testing"

	"github.com/forkbox/forkbox/internal/images"
)

// A filesystem-only pause keeps no memory: the resume is a fresh boot (the
// agent's counter starts over), and so is a reboot-connect of a memory pause.
func TestPauseFilesystemColdBoots(t *testing.T) {
	e := newEnv(t)
	defer e.shutdown(t)
	ctx := context.Background()
	sb := e.create(t, CreateRequest{AutoResume: true})
	e.count(t, sb.ID)
	e.count(t, sb.ID)
	if err := e.m.PauseFilesystem(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	e.waitState(t, sb.ID, StatePaused)
	got, _ := e.m.Get(ctx, sb.ID)
	dir, err := e.m.img.Open(ctx, images.Pause(sb.ID))
	if !got.FilesOnly || err != nil || !isFilesystemImage(dir) {
		t.Fatalf("not a filesystem-only pause: %+v (%v)", got, err)
	}
	if e.m.autoResumes(sb.ID) {
		t.Error("traffic would cold-boot a filesystem-only paused sandbox")
	}
	// A clone of it boots from the same files.
	res, err := e.m.Clone(ctx, sb.ID, CloneOptions{Count: 1})
	if err != nil || len(res.Sandboxes) != 1 || res.Sandboxes[0] == nil {
		t.Fatalf("clone of a filesystem-only pause: %v %+v", err, res)
	}
	if n := e.count(t, res.Sandboxes[0].ID); n != 1 {
		t.Errorf("clone's counter %d, want 1 (a fresh boot)", n)
	}
	if _, resumed, err := e.m.Connect(ctx, sb.ID, 0); err != nil || !resumed {
		t.Fatalf("connect: resumed %v, %v", resumed, err)
	}
	if n := e.count(t, sb.ID); n != 1 {
		t.Errorf("counter after the resume %d, want 1 (a fresh boot)", n)
	}

	// A memory pause keeps the counter, unless the connect asks to reboot.
	e.count(t, sb.ID)
	if err := e.m.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	e.waitState(t, sb.ID, StatePaused)
	if _, resumed, err := e.m.ConnectReboot(ctx, sb.ID, 0); err != nil || !resumed {
		t.Fatalf("reboot connect: resumed %v, %v", resumed, err)
	}
	if n := e.count(t, sb.ID); n != 1 {
		t.Errorf("counter after a reboot connect %d, want 1", n)
	}
	if _, resumed, err := e.m.ConnectReboot(ctx, sb.ID, 0); err != nil || resumed {
		t.Errorf("reboot connect of a running sandbox: resumed %v, %v (want only extended)", resumed, err)
	}
}
