// Command fspause compares the filesystem-only pause (E2B's pause
// {memory: false}: only the files the sandbox wrote are kept, the resume
// cold-boots) with the memory pause, for a tiny sandbox and one holding
// 256 MiB resident: how long the pause takes, the size of what it stores,
// and how long the resume takes until a command answers. It prints a
// markdown section (for docs/benchmarks.md).
//
// It starts its own daemon (<bin>/forkbox serve, as root) with a temporary
// data dir and its own sandbox network, and removes everything when done.
//
//	go run ./bench/fspause -bin ./bin >> docs/benchmarks.md
package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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
	c.daemon.Flags(8)
	flag.IntVar(&c.runs, "runs", 5, "pause/resume cycles per size and kind")
	flag.Parse()
	benchd.Main("fspause", func(ctx context.Context) error { return run(ctx, c) })
}

// size is a sandbox workload: tiny is the idle template, 256 keeps 256 MiB
// resident in a Python process (and writes a 1 MiB file either way).
type size struct {
	name  string
	setup string
}

var sizes = []size{
	{"tiny", ""},
	{"256 MiB", `nohup python3 -c 'import time; b = bytearray(256 << 20)
for i in range(0, len(b), 4096): b[i] = 1
open("/tmp/ready", "w").write("1"); time.sleep(1e6)' >/dev/null 2>&1 &
while [ ! -e /tmp/ready ]; do sleep 0.05; done`},
}

// result holds one size and kind's samples (ms, MiB).
type result struct {
	pause, resume, image []float64
}

func run(ctx context.Context, c config) error {
	d, err := benchd.Start(ctx, c.daemon.Named("fspause"))
	if err != nil {
		return err
	}
	defer d.Stop()
	cl := client.New(d.URL, d.Key)
	res := map[string]*result{}
	for _, sz := range sizes {
		for _, files := range []bool{false, true} {
			r := &result{}
			res[key(sz, files)] = r
			for i := range c.runs {
				if err := cycle(ctx, cl, d, sz, files, r); err != nil {
					return fmt.Errorf("%s: %w", key(sz, files), err)
				}
				slog.Info("cycle", "kind", key(sz, files), "i", i, "pause_ms", r.pause[i], "resume_ms", r.resume[i], "image_mib", r.image[i])
			}
		}
	}
	report(c, res)
	return nil
}

func key(sz size, files bool) string {
	if files {
		return sz.name + ", files only"
	}
	return sz.name + ", memory"
}

// cycle creates a sandbox, pauses it (the pause is done when its log says
// "sandbox paused"), measures the stored image and resumes it until a
// command answers.
func cycle(ctx context.Context, cl *client.Client, d *benchd.Daemon, sz size, files bool, r *result) error {
	sb, err := cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: 10 * time.Minute})
	if err != nil {
		return err
	}
	defer cl.KillSandbox(context.WithoutCancel(ctx), sb.SandboxID)
	script := "head -c 1048576 /dev/urandom > /home/user/data.bin"
	if sz.setup != "" {
		script += "\n" + sz.setup
	}
	if code, err := sb.Conn().Exec(ctx, client.ExecOptions{Shell: script}); err != nil || code != 0 {
		return fmt.Errorf("setup: exit %d, %v", code, err)
	}
	pause := cl.Pause
	if files {
		pause = cl.PauseFilesystem
	}
	t0 := time.Now()
	if err := pause(ctx, sb.SandboxID); err != nil {
		return err
	}
	if err := benchd.WaitLog(ctx, cl, sb.SandboxID, "sandbox paused", t0); err != nil {
		return err
	}
	r.pause = append(r.pause, ms(time.Since(t0)))
	r.image = append(r.image, float64(dirSize(filepath.Join(d.DataDir, "images", "paused", sb.SandboxID)))/(1<<20))
	t0 = time.Now()
	sb2, err := cl.Connect(ctx, sb.SandboxID, 10*time.Minute)
	if err != nil {
		return err
	}
	if err := echoUntil(ctx, sb2.Conn()); err != nil {
		return err
	}
	r.resume = append(r.resume, ms(time.Since(t0)))
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// echoUntil runs `echo hi` until it prints (a cold-booted agent needs a
// moment) or 30 s pass.
func echoUntil(ctx context.Context, conn *client.SandboxConn) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		var out strings.Builder
		code, err := conn.Exec(ctx, client.ExecOptions{Cmd: []string{"/bin/echo", "hi"}, Stdout: &out})
		if err == nil && code == 0 && strings.Contains(out.String(), "hi") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no echo output: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// dirSize is the bytes of the regular files under dir (allocated blocks,
// so a sparse memory file counts what it stores).
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return nil
		}
		if fi, err := e.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func report(c config, res map[string]*result) {
	fmt.Printf("\n## Filesystem-only pause vs memory pause\n\n")
	fmt.Printf("Generated by `go run ./bench/fspause -bin %s -runs %d` on %s. Pause: from the request until the "+
		"sandbox's log says `sandbox paused` (image written, sandbox released). Image: what the pause stores on disk "+
		"(allocated bytes). Resume: `Connect` then `echo hi` until output — a restore of the memory image, or a cold boot "+
		"of the template with the saved files. Both sizes wrote a 1 MiB file first; 256 MiB keeps that much resident "+
		"in a Python process (which a files-only pause does not keep). Medians of %d cycles.\n\n",
		c.daemon.Bin, c.runs, time.Now().UTC().Format("2006-01-02 15:04 MST"), c.runs)
	fmt.Printf("| sandbox, pause kind | pause p50 ms | image p50 MiB | resume → echo p50 ms |\n|---|---:|---:|---:|\n")
	for _, sz := range sizes {
		for _, files := range []bool{false, true} {
			r := res[key(sz, files)]
			fmt.Printf("| %s | %.0f | %.1f | %.0f |\n", key(sz, files), median(r.pause), median(r.image), median(r.resume))
		}
	}
	fmt.Println()
}
