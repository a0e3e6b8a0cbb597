package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDepsServeNeedsNoNPM runs `scripts/deps.sh serve` on a PATH that holds
// only what serving needs (debootstrap, nft, ip, mkfs.ext4, go) as shims, and npm,
// apt-get and dpkg as shims that record being called: serving must not
// install or run anything the tests alone need (`make serve` on a fresh
// machine has no npm). `deps.sh test` on the same PATH does reach for them,
// so the shims are known to work.
func TestDepsServeNeedsNoNPM(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	shims := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(shims, name), []byte("#!"+bash+"\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, ok := range []string{"debootstrap", "nft", "ip", "mkfs.ext4", "go"} {
		write(ok, "exit 0")
	}
	for _, recorded := range []string{"npm", "apt-get", "dpkg"} {
		write(recorded, "echo "+recorded+" \"$@\" >> "+calls+"\nexit 1")
	}
	for _, real := range []string{"dirname"} {
		p, err := exec.LookPath(real)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(shims, real)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(mode string) (string, error) {
		os.Remove(calls)
		cmd := exec.Command(bash, filepath.Join(root, "scripts", "deps.sh"), mode)
		cmd.Env = []string{"PATH=" + shims, "HOME=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		b, _ := os.ReadFile(calls)
		return strings.TrimSpace(string(out)) + "\n" + string(b), err
	}
	if out, err := run("serve"); err != nil || strings.Contains(out, "npm") || strings.Contains(out, "apt-get") {
		t.Errorf("deps.sh serve with every serving tool present: err %v, it ran or installed:\n%s", err, out)
	}
	if out, _ := run("test"); !strings.Contains(out, "apt-get") {
		t.Errorf("deps.sh test on the same PATH installed nothing (the shims hide something):\n%s", out)
	}
}
