package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSystemdUnit checks deploy/forkbox.service: systemd-analyze verify
// accepts it (with ExecStart pointing at this build's binaries, since it
// checks that they exist), every flag it passes is one `forkbox serve`
// knows, and it stops the daemon alone (KillMode=process), because the
// sandboxes in its cgroup keep running by design.
func TestSystemdUnit(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(filepath.Join(root, "deploy", "forkbox.service"))
	if err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv("FORKBOX_BIN")
	if bin == "" {
		bin = filepath.Join(root, "bin")
	}
	forkbox := filepath.Join(bin, "forkbox")
	if _, err := os.Stat(forkbox); err != nil {
		t.Fatalf("%v (run `make build`)", err)
	}
	if !strings.Contains(string(unit), "\nKillMode=process\n") {
		t.Error("the unit does not set KillMode=process: stopping it would kill every sandbox")
	}
	dir := t.TempDir()
	local := strings.ReplaceAll(string(unit), "/usr/local/bin/", bin+"/")
	if err := os.WriteFile(filepath.Join(dir, "forkbox.service"), []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", filepath.Join(dir, "forkbox.service")).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	help, err := exec.Command(forkbox, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("forkbox serve --help: %v\n%s", err, help)
	}
	flags := regexp.MustCompile(`(?m)\s(--[a-z-]+)`).FindAllStringSubmatch(execStart(string(unit)), -1)
	if len(flags) < 4 {
		t.Fatalf("ExecStart has %d flags, want the data dir, listen address and binaries", len(flags))
	}
	for _, m := range flags {
		if !strings.Contains(string(help), "      "+m[1]+" ") {
			t.Errorf("ExecStart passes %s, which `forkbox serve` does not know", m[1])
		}
	}
}

// execStart returns the unit's ExecStart command with its continuation
// lines joined.
func execStart(unit string) string {
	_, rest, _ := strings.Cut(unit, "\nExecStart=")
	var b strings.Builder
	for line := range strings.Lines(rest) {
		line = strings.TrimSpace(line)
		b.WriteString(" " + strings.TrimSuffix(line, "\\"))
		if !strings.HasSuffix(line, "\\") {
			break
		}
	}
	return b.String()
}
