package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/forkbox/forkbox/bench/benchd"
	"github.com/forkbox/forkbox/client"
)

// runCA measures what trusting the egress CA adds to a sandbox's start:
// create → first command output for a pooled create (the template's image
// lacks the CA: the first /init installs it) and for creates from a
// snapshot (the image has it: /init reads one file), against a daemon
// built without the egress CA (-base-bin) when given; and the install
// itself, timed inside a gVisor sandbox by the agent package's own
// BenchmarkInstallEgressCA (its test binary, built here, on the sandbox's
// root overlay).
func runCA(ctx context.Context, o benchd.Options, baseBin string, n int) error {
	tmp, err := os.MkdirTemp("", "egress-ca-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	testBin := filepath.Join(tmp, "agent.test")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", testBin, "./internal/guest/agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build the agent's test binary: %v: %s", err, out)
	}
	var rows [][2]string
	d, err := benchd.Start(ctx, o.Named("egressca"))
	if err != nil {
		return err
	}
	err = func() error {
		defer d.Stop()
		cl := client.New(d.URL, d.Key)
		pooled, err := createFirst(ctx, cl, "base", n)
		if err != nil {
			return err
		}
		rows = append(rows, [2]string{"create (pooled `base`, CA installed at /init) → first output", pooled})
		fromSnap, inside, err := snapshotAndInside(ctx, cl, testBin, n)
		if err != nil {
			return err
		}
		rows = append(rows, [2]string{"create from a snapshot (CA already there) → first output", fromSnap})
		return reportCA(rows, inside, n, baseBin)
	}()
	if err != nil || baseBin == "" {
		return err
	}
	base, err := benchd.Start(ctx, benchd.Options{Bin: baseBin, TemplateDir: o.TemplateDir, NetworkIndex: o.NetworkIndex, Name: "egresscabase"})
	if err != nil {
		return err
	}
	defer base.Stop()
	pooled, err := createFirst(ctx, client.New(base.URL, base.Key), "base", n)
	if err != nil {
		return err
	}
	fmt.Printf("| same, daemon from `%s` (no egress CA) | %s |\n", baseBin, pooled)
	return nil
}

// createFirst times n creates of tpl, each until `echo` in it has
// answered, and returns "p50 / p90 ms". Between creates the pool refills.
func createFirst(ctx context.Context, cl *client.Client, tpl string, n int) (string, error) {
	var ms []float64
	for i := 0; i <= n; i++ { // the first is a warm-up
		time.Sleep(1500 * time.Millisecond)
		start := time.Now()
		sb, err := cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: tpl, Timeout: 2 * time.Minute})
		if err != nil {
			return "", err
		}
		var out bytes.Buffer
		code, err := sb.Conn().Exec(ctx, client.ExecOptions{Cmd: []string{"/bin/echo", "hi"}, Stdout: &out})
		took := time.Since(start)
		cl.KillSandbox(context.WithoutCancel(ctx), sb.SandboxID)
		if err != nil || code != 0 || out.String() != "hi\n" {
			return "", fmt.Errorf("first command: %d %q %v", code, out.String(), err)
		}
		if i > 0 {
			ms = append(ms, float64(took.Microseconds())/1000)
		}
	}
	sort.Float64s(ms)
	return fmt.Sprintf("%.0f / %.0f", ms[len(ms)/2], ms[len(ms)*9/10]), nil
}

// snapshotAndInside times creates from a snapshot of a sandbox that
// trusts the CA, and runs the install benchmark inside that sandbox.
func snapshotAndInside(ctx context.Context, cl *client.Client, testBin string, n int) (string, string, error) {
	sb, err := cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: 10 * time.Minute})
	if err != nil {
		return "", "", err
	}
	defer cl.KillSandbox(context.WithoutCancel(ctx), sb.SandboxID)
	var out bytes.Buffer
	check := "grep -c 'BEGIN CERTIFICATE' /usr/local/share/ca-certificates/forkbox-egress.crt"
	if code, err := sb.Conn().Exec(ctx, client.ExecOptions{Shell: check, Stdout: &out}); err != nil || code != 0 || strings.TrimSpace(out.String()) != "1" {
		return "", "", fmt.Errorf("the sandbox does not hold the egress CA: %d %q %v", code, out.String(), err)
	}
	snap, err := cl.Snapshot(ctx, sb.SandboxID, "")
	if err != nil {
		return "", "", err
	}
	fromSnap, err := createFirst(ctx, cl, snap.SnapshotID, n)
	if err != nil {
		return "", "", err
	}
	bin, err := os.ReadFile(testBin)
	if err != nil {
		return "", "", err
	}
	if err := sb.Conn().WriteFile(ctx, "/var/tmp/agent.test", bin); err != nil {
		return "", "", err
	}
	out.Reset()
	cmd := "chmod +x /var/tmp/agent.test && TMPDIR=/var/tmp /var/tmp/agent.test -test.run '^$' -test.bench InstallEgressCA -test.benchtime 200x"
	if code, err := sb.Conn().Exec(ctx, client.ExecOptions{Shell: cmd, User: "root", Stdout: &out, Stderr: &out}); err != nil || code != 0 {
		return "", "", fmt.Errorf("the install benchmark in the sandbox: %d %v: %s", code, err, out.String())
	}
	return fromSnap, out.String(), nil
}

var benchLine = regexp.MustCompile(`BenchmarkInstallEgressCA/(\w+)-\d+\s+\d+\s+(\d+) ns/op`)

func reportCA(rows [][2]string, inside string, n int, baseBin string) error {
	got := map[string]string{}
	for _, m := range benchLine.FindAllStringSubmatch(inside, -1) {
		var ns float64
		fmt.Sscan(m[2], &ns)
		got[m[1]] = fmt.Sprintf("%.3f", ns/1e6)
	}
	if got["installed"] == "" || got["fresh"] == "" {
		return fmt.Errorf("no benchmark lines in: %s", inside)
	}
	cmd := "go run ./bench/egress -ca -creates " + fmt.Sprint(n)
	if baseBin != "" {
		cmd += " -base-bin " + baseBin
	}
	fmt.Printf("\n## Egress CA: what trusting it adds to a sandbox's start\n\n`%s` (root).\n", cmd)
	fmt.Printf("Inside a gVisor sandbox (the agent package's BenchmarkInstallEgressCA, its test binary run on\n")
	fmt.Printf("the sandbox's root overlay, 200 iterations): /init's install when the image already trusts the CA\n")
	fmt.Printf("(every restore of such an image) **%s ms**; the first install (appending to a 220 KiB bundle,\n", got["installed"])
	fmt.Printf("writing the CA file) **%s ms**.\n\n", got["fresh"])
	fmt.Printf("| create → first `echo` output (n=%d) | p50 / p90 ms |\n|---|---|\n", n)
	for _, r := range rows {
		fmt.Printf("| %s | %s |\n", r[0], r[1])
	}
	return nil
}
