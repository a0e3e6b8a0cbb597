package template

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The progress of a long build: picked lines, reworded, with the time
// since start; a failure carries the command's last lines.
func TestRunLogged(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	script := `echo "I: Retrieving a"; echo noise; echo "I: Unpacking b"`
	if err := runLogged(ctx, &out, time.Now(), debootstrapLines(), "sh", "-c", script); err != nil {
		t.Fatal(err)
	}
	want := "  [  0s] debootstrap #1: Retrieving a\n  [  0s] debootstrap #2: Unpacking b\n"
	if out.String() != want {
		t.Errorf("progress:\n%q\nwant\n%q", out.String(), want)
	}
	out.Reset()
	apt := func(line string) (string, bool) { return "apt: " + line, strings.HasPrefix(line, "Setting up ") }
	err := runLogged(ctx, &out, time.Now(), apt, "sh", "-c", `echo "Setting up x"; echo "E: broken"; exit 3`)
	if err == nil || !strings.Contains(err.Error(), "E: broken") {
		t.Errorf("failure: %v, want the command's last lines", err)
	}
	if out.String() != "  [  0s] apt: Setting up x\n" {
		t.Errorf("apt progress: %q", out.String())
	}
}
