package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/forkbox/forkbox/bench/benchd"
	"github.com/forkbox/forkbox/client"
)

// shapeResult is what a create costs by where its sandbox comes from: the
// pool (the template's shape), an image of its shape already made, or one
// made on the way (a cold boot and a checkpoint first); boot and
// checkpoint are those of the images made, read from the daemon's log.
type shapeResult struct {
	pooled, known, first []float64 // create → first command, ms
	boot, checkpoint     []float64 // ms
}

// shapes measures the create paths of another disk size on a daemon of
// this build with a pool.
func shapes(ctx context.Context, o benchd.Options, n int) (shapeResult, error) {
	var r shapeResult
	d, err := benchd.Start(ctx, o.Named("limits", "--pool-size", "1"))
	if err != nil {
		return r, err
	}
	defer d.Stop()
	cl := client.New(d.URL, d.Key)
	timed := func(out *[]float64, disk int) error {
		time.Sleep(2 * time.Second) // the pool refills, the host settles
		t0 := time.Now()
		sb, err := cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", DiskSizeMB: disk, Timeout: 5 * time.Minute})
		if err != nil {
			return err
		}
		defer cl.KillSandbox(context.WithoutCancel(ctx), sb.SandboxID)
		_, err = run1(ctx, sb.Conn(), "echo hi")
		*out = append(*out, ms(time.Since(t0)))
		return err
	}
	// A size no run made before: each first create makes its image.
	base := 1100 + int(time.Now().Unix()%1000)
	for i := range n {
		if err := timed(&r.pooled, 0); err != nil {
			return r, fmt.Errorf("pooled create: %w", err)
		}
		if err := timed(&r.first, base+i); err != nil {
			return r, fmt.Errorf("create of a new shape: %w", err)
		}
		if err := timed(&r.known, base); err != nil {
			return r, fmt.Errorf("create of a known shape: %w", err)
		}
	}
	r.boot, r.checkpoint, err = warmTimes(d.LogPath)
	return r, err
}

// warmLine matches the daemon's log line of an image of another shape made
// (its content key is the template image's 16 hex digits and 12 of shape).
var warmLine = regexp.MustCompile(`msg="template image ready".* image=templates/[0-9a-f]{28} boot=(\S+) checkpoint=(\S+)`)

// warmTimes reads the boot and checkpoint times of the shaped images the
// daemon logged making.
func warmTimes(logPath string) (boot, checkpoint []float64, err error) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return nil, nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		m := warmLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		bt, err1 := time.ParseDuration(m[1])
		ct, err2 := time.ParseDuration(m[2])
		if err1 != nil || err2 != nil {
			return nil, nil, fmt.Errorf("log line %q", line)
		}
		boot, checkpoint = append(boot, ms(bt)), append(checkpoint, ms(ct))
	}
	return boot, checkpoint, nil
}

func reportShapes(r shapeResult) {
	fmt.Printf("\nA create of `base` with another `diskSizeMB` (a restore keeps its image's disk size, so it needs an image "+
		"of that shape; same daemon, pool of 1, n=%d each, create → first command p50):\n\n", len(r.pooled))
	fmt.Printf("| path | p50 |\n|---|---:|\n")
	fmt.Printf("| pooled, the template's shape | %.0f ms |\n", median(r.pooled))
	fmt.Printf("| another size, its image already made (a restore) — what every later create of it costs | %.0f ms |\n", median(r.known))
	fmt.Printf("| another size, first create (cold boot + checkpoint + restore) | %.0f ms |\n", median(r.first))
	fmt.Printf("| of which the cold boot (create → agent answering), what a cold boot per create would cost | %.0f ms |\n", median(r.boot))
	fmt.Printf("| of which the checkpoint | %.0f ms |\n\n", median(r.checkpoint))
}
