// Command diff measures diff and apply on a 50,000-file tree: the base
// template (about 42,000 entries) plus 8,000 files a sandbox writes, then
// snapshots (parent P); a sandbox B started from P changes 1,000 files
// (600 edited, 300 added, 100 deleted). It times B's diff against P, a
// diff of B's snapshot against P, applying B's changes into another
// sandbox started from P, the upper-layer read alone (a diff that selects
// nothing) and a live snapshot of B for comparison, and prints a markdown
// section (for docs/benchmarks.md).
//
// It starts its own daemon (<bin>/forkbox serve, as root) with a temporary
// data dir and its own sandbox network, and removes everything when done.
//
//	go run ./bench/diff -bin ./bin >> docs/benchmarks.md
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/forkbox/forkbox/bench/benchd"
	"github.com/forkbox/forkbox/client"
)

type config struct {
	daemon benchd.Options
	runs   int
}

func main() {
	var c config
	c.daemon.Flags(12)
	flag.IntVar(&c.runs, "runs", 5, "samples per measurement")
	flag.Parse()
	benchd.Main("diff", func(ctx context.Context) error { return run(ctx, c) })
}

// makeTree writes 8,000 files of about 1 KiB in 80 directories.
const makeTree = `python3 - <<'EOF'
import os
for d in range(80):
    p = "/home/user/tree/d%02d" % d
    os.makedirs(p, exist_ok=True)
    for f in range(100):
        with open("%s/f%03d.txt" % (p, f), "w") as fh:
            fh.write(("line %d of file %d/%d\n" % (0, d, f)) * 40)
EOF`

// change1000 edits 600 files, adds 300 and deletes 100.
const change1000 = `python3 - <<'EOF'
import os
n = 0
for d in range(80):
    for f in range(100):
        p = "/home/user/tree/d%02d/f%03d.txt" % (d, f)
        if n < 600 and f % 10 == 0 or n < 600 and f % 10 == 1 and d < 40:
            with open(p, "a") as fh:
                fh.write("edited\n")
            n += 1
for i in range(300):
    with open("/home/user/tree/d%02d/new%03d.txt" % (i % 80, i), "w") as fh:
        fh.write("added %d\n" % i)
for i in range(100):
    os.remove("/home/user/tree/d%02d/f%03d.txt" % (i % 80, 55 + i // 80))
EOF`

// times are the samples of one measurement, in ms.
type times []float64

func (t times) String() string {
	return fmt.Sprintf("%.0f (min %.0f, max %.0f)", benchd.Quantile(t, 0.5), benchd.Quantile(t, 0), benchd.Quantile(t, 1))
}

func run(ctx context.Context, c config) error {
	d, err := benchd.Start(ctx, c.daemon.Named("diff", "--log-level=debug"))
	if err != nil {
		return err
	}
	defer d.Stop()
	defer phases(d.LogPath)
	cl := client.New(d.URL, d.Key)
	parent, b, err := prepare(ctx, cl)
	if err != nil {
		return err
	}
	res, err := measure(ctx, cl, c, parent, b)
	if err != nil {
		return err
	}
	res.tar = tarTimes(d.LogPath)
	report(c, res)
	return nil
}

// prepare makes parent P (8,000 files over the template) and B (P with
// 1,000 files changed).
func prepare(ctx context.Context, cl *client.Client) (string, string, error) {
	a, err := cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: time.Hour})
	if err != nil {
		return "", "", err
	}
	if err := sh(ctx, a.Conn(), makeTree); err != nil {
		return "", "", err
	}
	p, err := cl.Snapshot(ctx, a.SandboxID, "")
	if err != nil {
		return "", "", err
	}
	b, err := cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: p.SnapshotID, Timeout: time.Hour})
	if err != nil {
		return "", "", err
	}
	if err := sh(ctx, b.Conn(), change1000); err != nil {
		return "", "", err
	}
	return p.SnapshotID, b.SandboxID, nil
}

// phases copies the daemon's timings of each diff's and apply's parts
// to stderr: where the time goes.
func phases(logPath string) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "msg=diff") || strings.Contains(l, "apply phases") || strings.Contains(l, "upper layer written") || strings.Contains(l, "agent applied") {
			fmt.Fprintln(os.Stderr, l)
		}
	}
}

// tarTimes are the daemon's timings of `runsc tar rootfs-upper` (how long
// a sandbox's writers wait for a diff), in ms.
func tarTimes(logPath string) times {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return nil
	}
	var out times
	for _, l := range strings.Split(string(b), "\n") {
		_, took, ok := strings.Cut(l, "upper layer written")
		if !ok {
			continue
		}
		if _, v, ok := strings.Cut(took, "took="); ok {
			if d, err := time.ParseDuration(strings.Fields(v)[0]); err == nil {
				out = append(out, benchd.MS(d))
			}
		}
	}
	return out
}

func sh(ctx context.Context, conn *client.SandboxConn, script string) error {
	code, err := conn.Exec(ctx, client.ExecOptions{Shell: script, User: "root"})
	if err == nil && code != 0 {
		err = fmt.Errorf("script exited %d", code)
	}
	return err
}
