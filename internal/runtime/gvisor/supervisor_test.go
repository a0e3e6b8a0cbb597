package gvisor

import (
	"os"
	"os/exec"
	"testing"
)

// TestProcStart: a process's start time is stable while it lives (so a
// cached supervisor is recognised) and unreadable once it is gone (so a
// wait falls back to runsc).
func TestProcStart(t *testing.T) {
	a, err := procStart(os.Getpid())
	if err != nil || a == "" {
		t.Fatalf("own start time: %q, %v", a, err)
	}
	if b, _ := procStart(os.Getpid()); b != a {
		t.Errorf("start time changed: %q then %q", a, b)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if s, err := procStart(cmd.Process.Pid); err == nil {
		t.Errorf("start time of an exited process: %q", s)
	}
}
