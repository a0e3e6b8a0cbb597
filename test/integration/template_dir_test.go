package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// TestCopiedTemplateDir: a daemon given a copy of the template dir at
// another path creates sandboxes from it. The copy holds the booted-image
// seeds left for the old path, whose checkpoints name the old root
// filesystem, which gVisor refuses to restore from (every create was a
// 500): a template's image is keyed by its rootfs's path, so the daemon
// boots its own there.
func TestCopiedTemplateDir(t *testing.T) {
	ctx := daemontest.Context(t)
	src := daemontest.TemplateDir(t)
	// Hard links beside the original (same file system): a copy in
	// seconds, sharing the files.
	dst, err := os.MkdirTemp(filepath.Dir(src), "copied-templates-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dst) })
	if out, err := exec.Command("cp", "-al", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -al %s: %v\n%s", src, err, out)
	}
	d := daemontest.Start(t, daemontest.Options{ExtraArgs: []string{"--template-dir", dst, "--pool-size", "0"}})
	c := client.New(d.URL, d.APIKey)
	for _, tpl := range []string{"", "code-interpreter-v1"} {
		sb := create(t, ctx, c, client.CreateOptions{TemplateID: tpl})
		if got := sh(t, ctx, sb.Conn(), "echo copied"); got != "copied" {
			t.Errorf("sandbox of template %q from the copied dir answers %q", tpl, got)
		}
	}
}
