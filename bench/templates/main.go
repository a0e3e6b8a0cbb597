// Command templates measures user template builds and sandboxes started
// from them (issue 14's benchmarks): a cold build of a small template from
// a registry image, a forced and a cached rebuild, the first build on
// forkbox's base (which imports base as a layer), pull+unpack throughput of
// the base rootfs as an image, create → first command from a built
// template vs from base in the same run, and create → first HTTP 200 from
// a start-ready template vs a base sandbox that starts the same server
// after create. It prints a markdown section for docs/benchmarks.md.
//
// It starts its own daemon (<bin>/forkbox serve, as root, `--pool-size 2`)
// on a temporary data dir and its own sandbox network, and an in-process
// registry on loopback holding the images; everything goes at the end.
//
//	go run ./bench/templates -bin ./bin >> docs/benchmarks.md
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/forkbox/forkbox/bench/benchd"
	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/oci/ocitest"
)

type config struct {
	daemon benchd.Options
	n      int
	pulls  int
}

func main() {
	var c config
	c.daemon.Flags(11)
	flag.IntVar(&c.n, "n", 9, "samples per create/rebuild measurement")
	flag.IntVar(&c.pulls, "pulls", 3, "pull+unpack runs of the base rootfs image")
	flag.Parse()
	benchd.Main("templates", func(ctx context.Context) error { return run(ctx, c) })
}

// results are the measurements, in ms (or MiB/s).
type results struct {
	cold, onBase                 float64
	forced, cached               []float64
	pullMiBs, pullMiB            []float64
	pullUnpacked                 float64
	cmdBuilt, cmdBase            []float64
	httpReady, httpStartOnCreate []float64
}

func run(ctx context.Context, c config) error {
	reg := ocitest.NewRegistry()
	defer reg.Close()
	if err := pushImages(reg); err != nil {
		return err
	}
	d, err := benchd.Start(ctx, c.daemon.Named("templates", "--pool-size", "2"))
	if err != nil {
		return err
	}
	defer d.Stop()
	b := &bench{c: c, d: d, cl: client.New(d.URL, d.Key), image: ocitest.Host(reg.URL) + "/fbx/busybox:1"}
	var r results
	if err := b.builds(ctx, &r); err != nil {
		return err
	}
	if err := b.creates(ctx, &r); err != nil {
		return err
	}
	if err := pullUnpack(ctx, c, reg, &r); err != nil {
		return err
	}
	report(c, &r)
	return nil
}

// bench is one run's daemon, client and registry image.
type bench struct {
	c     config
	d     *benchd.Daemon
	cl    *client.Client
	image string
}

// pushImages pushes the small image the builds start from: busybox (no
// bash, no user `user`) with a page to serve.
func pushImages(reg *httptest.Server) error {
	l, err := ocitest.NewBusyboxLayer(map[string][]byte{"www/index.html": []byte("hello from busybox\n")})
	if err != nil {
		return err
	}
	img, err := ocitest.NewImage(ocitestConfig(), l)
	if err != nil {
		return err
	}
	return ocitest.Write(ocitest.Host(reg.URL), "fbx/busybox:1", img)
}

func report(c config, r *results) {
	p := func(v []float64) string {
		return fmt.Sprintf("%.0f / %.0f ms", benchd.Quantile(v, 0.5), benchd.Quantile(v, 0.9))
	}
	fmt.Printf("\n## Templates (bench/templates)\n\n")
	fmt.Printf("`go run ./bench/templates -bin ./bin -n %d` (own daemon with `--pool-size 2` and the default `--pool-recent 3`, "+
		"images in an in-process registry on loopback; %s, %d cores). p50 / p90 of %d unless one sample.\n\n",
		c.n, time.Now().UTC().Format("2006-01-02"), benchd.CPUs(), c.n)
	fmt.Printf("| measurement | value |\n|---|---|\n")
	fmt.Printf("| cold build of a small template (busybox image: pull, unpack, agent and user `user` put in, ENV + COPY + WORKDIR + RUN, capture), one sample | %.0f ms |\n", r.cold)
	fmt.Printf("| forced rebuild (`skipCache`: every step again, the image's rootfs cached) | %s |\n", p(r.forced))
	fmt.Printf("| cached rebuild (nothing changed) | %s |\n", p(r.cached))
	fmt.Printf("| first build on forkbox's `base` (imports base's rootfs as a layer, once per data dir), one sample | %.0f ms |\n", r.onBase)
	fmt.Printf("| pull + unpack of the base rootfs as an image (%.0f MiB gzip'd, %.0f MiB unpacked), per run | %s |\n",
		benchd.Quantile(r.pullMiB, 0.5), r.pullUnpacked, mibs(r.pullMiBs))
	fmt.Printf("| create → first command, built template (pooled) | %s |\n", p(r.cmdBuilt))
	fmt.Printf("| create → first command, `base` (same run) | %s |\n", p(r.cmdBase))
	fmt.Printf("| create → first HTTP 200, start-ready template (`python3 -m http.server` captured serving) | %s |\n", p(r.httpReady))
	fmt.Printf("| create → first HTTP 200, `base` + the same server started after create | %s |\n", p(r.httpStartOnCreate))
}

func mibs(v []float64) string {
	var parts []string
	for _, x := range v {
		parts = append(parts, fmt.Sprintf("%.0f", x))
	}
	return fmt.Sprintf("p50 %.0f MiB/s (runs: %s)", benchd.Quantile(v, 0.5), strings.Join(parts, ", "))
}
