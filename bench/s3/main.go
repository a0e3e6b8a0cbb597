// Command s3 measures images in S3-compatible object storage on a local
// SeaweedFS (built by scripts/seaweedfs.sh, started here on loopback):
// the upload and download throughput of one image of -size MiB through
// the images package's object store (multipart, checksummed), a commit of
// the same bytes again (every blob already there), a local disk copy of
// the same file as the floor; then a tiny sandbox's pause and resume on a
// daemon on local disk and on one with --object-store. It prints a
// markdown section (for docs/benchmarks.md).
//
//	go run ./bench/s3 -bin ./bin -template-dir /var/lib/forkbox/templates >> docs/benchmarks.md
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/forkbox/forkbox/bench/benchd"
	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/images/s3test"
	"github.com/forkbox/forkbox/internal/runtime"
)

type config struct {
	daemon benchd.Options
	weed   string
	sizeMB int
	runs   int
}

func main() {
	var c config
	c.daemon.Flags(14)
	flag.StringVar(&c.weed, "weed", "", "SeaweedFS weed binary (default: as the tests find it, bin/weed)")
	flag.IntVar(&c.sizeMB, "size", 256, "MiB of the image whose transfer is measured")
	flag.IntVar(&c.runs, "runs", 3, "runs of each measurement")
	flag.Parse()
	benchd.Main("s3", func(ctx context.Context) error { return run(ctx, c) })
}

func run(ctx context.Context, c config) error {
	if c.weed == "" {
		w, err := s3test.Binary()
		if err != nil {
			return err
		}
		c.weed = w
	}
	tmp, err := os.MkdirTemp("", "forkbox-s3bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	srv, err := s3test.Launch(c.weed, filepath.Join(tmp, "weed"))
	if srv != nil {
		defer srv.Stop()
	}
	if err != nil {
		return err
	}
	tr, err := transfers(ctx, c, srv, tmp)
	if err != nil {
		return err
	}
	disk, err := pauseResume(ctx, c, nil)
	if err != nil {
		return fmt.Errorf("pause/resume on disk: %w", err)
	}
	s3, err := pauseResume(ctx, c, srv)
	if err != nil {
		return fmt.Errorf("pause/resume on S3: %w", err)
	}
	report(c, tr, disk, s3)
	return nil
}

// transferResult holds MiB/s samples.
type transferResult struct{ up, down, again, floor []float64 }

func transfers(ctx context.Context, c config, srv *s3test.Server, tmp string) (*transferResult, error) {
	src := filepath.Join(tmp, "image.bin")
	if err := writeRandom(src, int64(c.sizeMB)<<20); err != nil {
		return nil, err
	}
	r := &transferResult{}
	mib := float64(c.sizeMB)
	for i := range c.runs {
		o, err := images.OpenObjectStore(ctx, images.ObjectStoreConfig{URL: srv.URL(runtime.NewID()), Endpoint: srv.Endpoint,
			Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, CacheDir: filepath.Join(tmp, "cache"),
			CacheSize: 4 << 30, Logger: slog.Default()})
		if err != nil {
			return nil, err
		}
		s := o.Images()
		t0 := time.Now()
		if err := floorCopy(src, filepath.Join(tmp, "floor.bin")); err != nil {
			return nil, err
		}
		r.floor = append(r.floor, mib/time.Since(t0).Seconds())
		for _, again := range []bool{false, true} {
			ref := images.Pause(runtime.NewID())
			dir, err := s.Create(ctx, ref)
			if err != nil {
				return nil, err
			}
			if err := os.Link(src, filepath.Join(dir, "pages.img")); err != nil {
				return nil, err
			}
			t0 = time.Now()
			if err := s.Commit(ctx, ref); err != nil {
				return nil, err
			}
			rate := mib / time.Since(t0).Seconds()
			if again {
				r.again = append(r.again, rate)
				continue
			}
			r.up = append(r.up, rate)
			o.EvictCache(true)
			t0 = time.Now()
			if _, err := s.Open(ctx, ref); err != nil {
				return nil, err
			}
			r.down = append(r.down, mib/time.Since(t0).Seconds())
		}
		slog.Info("transfer", "run", i, "up_mib_s", r.up[i], "down_mib_s", r.down[i], "again_mib_s", r.again[i], "floor_mib_s", r.floor[i])
		o.EvictCache(true)
	}
	return r, nil
}

// writeRandom writes size incompressible bytes.
func writeRandom(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	rng := rand.NewChaCha8([32]byte{1})
	if _, err := io.CopyN(f, rng, size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// floorCopy copies src to dst and syncs: what the local disk does with
// the same bytes.
func floorCopy(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// pauseResult holds ms samples.
type pauseResult struct{ pause, resume []float64 }

// pauseResume pauses and resumes a tiny sandbox -runs times on a daemon on
// local disk (srv nil) or on srv.
func pauseResume(ctx context.Context, c config, srv *s3test.Server) (*pauseResult, error) {
	o := c.daemon.Named("s3disk")
	if srv != nil {
		o = c.daemon.Named("s3obj", "--object-store", srv.URL("daemon"))
		o.Env = srv.Env()
	}
	o.Args = append(o.Args, "--pool-size", "0")
	d, err := benchd.Start(ctx, o)
	if err != nil {
		return nil, err
	}
	defer d.Stop()
	cl := client.New(d.URL, d.Key)
	r := &pauseResult{}
	for range c.runs {
		if err := cycle(ctx, cl, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func cycle(ctx context.Context, cl *client.Client, r *pauseResult) error {
	sb, err := cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: 10 * time.Minute})
	if err != nil {
		return err
	}
	defer cl.KillSandbox(context.WithoutCancel(ctx), sb.SandboxID)
	t0 := time.Now()
	if err := cl.Pause(ctx, sb.SandboxID); err != nil {
		return err
	}
	if err := benchd.WaitLog(ctx, cl, sb.SandboxID, "sandbox paused", t0); err != nil {
		return err
	}
	r.pause = append(r.pause, benchd.MS(time.Since(t0)))
	t0 = time.Now()
	sb2, err := cl.Connect(ctx, sb.SandboxID, 10*time.Minute)
	if err != nil {
		return err
	}
	var out strings.Builder
	if code, err := sb2.Conn().Exec(ctx, client.ExecOptions{Cmd: []string{"/bin/echo", "hi"}, Stdout: &out}); err != nil || code != 0 {
		return fmt.Errorf("echo after resume: %d %v", code, err)
	}
	r.resume = append(r.resume, benchd.MS(time.Since(t0)))
	return nil
}

func report(c config, tr *transferResult, disk, s3 *pauseResult) {
	med := func(v []float64) float64 { return benchd.Quantile(v, 0.5) }
	fmt.Printf("\n## Images in object storage (S3 on a local SeaweedFS)\n\n")
	fmt.Printf("Generated by `go run ./bench/s3 -bin %s -size %d -runs %d` on %s. The S3 server is SeaweedFS "+
		"(scripts/seaweedfs.sh's pinned build, `weed server -s3` on loopback, one volume server) on the same 2-core machine, "+
		"**shared with other helpers' builds and tests while it ran**: numbers are noisy, medians of %d runs. "+
		"Upload: `Commit` of a %d MiB image (one incompressible file: sha256 scan, then a streamed multipart upload of "+
		"16 MiB parts with its checksum checked, then the manifest). Download: `Open` of it with the cache emptied "+
		"(download, sha256 verified). Again: `Commit` of the same bytes as another image (every blob found there, none "+
		"uploaded). Floor: a local copy of the same file with fsync.\n\n", c.daemon.Bin, c.sizeMB, c.runs,
		time.Now().UTC().Format("2006-01-02 15:04 MST"), c.runs, c.sizeMB)
	fmt.Printf("| %d MiB image | MiB/s p50 |\n|---|---:|\n", c.sizeMB)
	fmt.Printf("| upload (Commit) | %.0f |\n| download (Open, cache cold) | %.0f |\n| commit again (dedup: nothing uploaded) | %.0f |\n| floor: local copy + fsync | %.0f |\n\n",
		med(tr.up), med(tr.down), med(tr.again), med(tr.floor))
	fmt.Printf("Tiny sandbox (base template, idle), pause until its log says `sandbox paused` (with --object-store: " +
		"uploaded and its manifest written), resume = `Connect` until `echo hi` answers (the image is in the local cache, " +
		"as on the node that paused it):\n\n")
	fmt.Printf("| daemon | pause p50 ms | resume → echo p50 ms |\n|---|---:|---:|\n")
	fmt.Printf("| local disk | %.0f | %.0f |\n| --object-store (SeaweedFS) | %.0f | %.0f |\n", med(disk.pause), med(disk.resume), med(s3.pause), med(s3.resume))
}
