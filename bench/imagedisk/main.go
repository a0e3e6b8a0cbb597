// Command imagedisk measures the disk one pulled image costs: it pushes a
// Debian image (the base template's rootfs as one layer) to a registry it
// starts on loopback, builds a template from it with one RUN step, and
// counts what the daemon's data dir holds by area — compressed blobs, an
// unpack cache, layers, the template image — each inode once (hard links
// share their blocks); the built-in templates' images, there before the
// build, do not count. It prints a markdown table row (for
// docs/benchmarks.md).
//
// It starts its own daemon (<bin>/forkbox serve, as root) with a temporary
// data dir and its own sandbox network, and removes everything when done.
// It reads both the layout before the image store (builds/, oci/rootfs)
// and after (images/), so it measures an older build too:
//
//	go run ./bench/imagedisk -bin ./bin -label "this build" >> docs/benchmarks.md
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/forkbox/forkbox/bench/benchd"
	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/oci/ocitest"
)

type config struct {
	daemon benchd.Options
	rootfs string
	label  string
	args   string
	logs   bool
}

func main() {
	var c config
	c.daemon.Flags(11)
	flag.StringVar(&c.rootfs, "rootfs", "/var/lib/forkbox/templates/base/rootfs", "root filesystem pushed as the image")
	flag.StringVar(&c.label, "label", "", "what the measured build is (the table's first column)")
	flag.StringVar(&c.args, "serve-args", "", "extra serve flags, space-separated (e.g. --oci-blob-cache 0)")
	flag.BoolVar(&c.logs, "logs", false, "print the build's log (where its time went)")
	flag.Parse()
	benchd.Main("imagedisk", func(ctx context.Context) error { return run(ctx, c) })
}

// areas are the parts of a data dir that hold an image's bytes, before
// and after the image store owned them all; an inode counts in the first
// area it is found in.
var areas = []struct{ name, path string }{
	{"compressed blobs", "oci/blobs"},
	{"unpack cache", "oci/rootfs"},
	{"layers", "images/layers"},
	{"layers", "builds/layers"},
	{"template image", "images/templates"},
	{"template image", "builds/images"},
}

func run(ctx context.Context, c config) error {
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	t0 := time.Now()
	size, err := ocitest.PushDir(ctx, strings.TrimPrefix(reg.URL, "http://")+"/fbx/debian:1", c.rootfs)
	if err != nil {
		return err
	}
	slog.Info("pushed", "rootfs", c.rootfs, "compressed_mib", size>>20, "took", time.Since(t0).Round(time.Second))
	args := append([]string{"--registry-mirror", "docker.io=" + reg.URL}, strings.Fields(c.args)...)
	d, err := benchd.Start(ctx, c.daemon.Named("imagedisk", args...))
	if err != nil {
		return err
	}
	defer d.Stop()
	// What the daemon holds before (the built-in templates' images) is
	// not the image's.
	seen := map[[2]uint64]bool{}
	if _, err := measure(d.DataDir, seen); err != nil {
		return err
	}
	t0 = time.Now()
	if err := build(ctx, client.New(d.URL, d.Key), c.logs); err != nil {
		return err
	}
	took := time.Since(t0)
	use, err := measure(d.DataDir, seen)
	if err != nil {
		return err
	}
	row := []string{c.label}
	total := int64(0)
	for _, name := range []string{"compressed blobs", "unpack cache", "layers", "template image"} {
		row = append(row, mib(use[name]))
		total += use[name]
	}
	row = append(row, mib(total), took.Round(time.Second).String())
	fmt.Printf("| %s |\n", strings.Join(row, " | "))
	return nil
}

// build builds template debian from the pushed image with one RUN step.
func build(ctx context.Context, c *client.Client, logs bool) error {
	tk, err := c.RequestTemplateBuild(ctx, "debian", nil, 1, 512)
	if err != nil {
		return err
	}
	spec := client.TemplateBuildSpec{FromImage: "docker.io/fbx/debian:1", Steps: []client.TemplateStep{
		{Type: "RUN", Args: []string{"echo hello > /hello", "root"}},
	}}
	if err := c.StartTemplateBuild(ctx, tk.TemplateID, tk.BuildID, spec); err != nil {
		return err
	}
	for {
		st, err := c.GetTemplateBuildStatus(ctx, tk.TemplateID, tk.BuildID, 0)
		switch {
		case err != nil:
			return err
		case st.Status == "ready":
			for _, e := range st.LogEntries {
				if logs {
					slog.Info("build log", "at", e.Timestamp.Format("15:04:05.000"), "msg", e.Message)
				}
			}
			return nil
		case st.Status == "error":
			return fmt.Errorf("build failed: %+v", st.Reason)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// measure counts the bytes each area holds, each inode once and none in
// seen, which it adds them to.
func measure(dataDir string, seen map[[2]uint64]bool) (map[string]int64, error) {
	use := map[string]int64{}
	for _, a := range areas {
		err := filepath.WalkDir(filepath.Join(dataDir, a.path), func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return fs.SkipDir
				}
				return err
			}
			var st syscall.Stat_t
			if err := syscall.Lstat(p, &st); err != nil {
				return err
			}
			if id := [2]uint64{st.Dev, st.Ino}; !seen[id] {
				seen[id] = true
				use[a.name] += st.Blocks * 512
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return use, nil
}

func mib(n int64) string {
	if n == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}
