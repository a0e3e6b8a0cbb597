package main

import (
	"context"
	"time"

	"github.com/forkbox/forkbox/bench/benchd"
	"github.com/forkbox/forkbox/client"
)

// benchBurst: one commands.run("echo hi") in each of cfg.burstN live
// sandboxes at the same moment (issue 22 §1), after each had one command
// and all idled 3 s (their command pools refilled).
func (b *fbBench) benchBurst(ctx context.Context) {
	keys := []string{"burst.each", "burst.p99", "burst.all", "burst.cpu"}
	var conns []*client.SandboxConn
	defer func() {
		for _, c := range conns {
			b.kill(ctx, c.ID())
		}
	}()
	for range b.cfg.burstN {
		sb, err := b.create(ctx)
		if err == nil {
			conns = append(conns, sb.Conn())
			_, err = echoWith(ctx, sb.Conn(), sdkEchoArgv)
		}
		if err != nil {
			b.fail(err, keys...)
			return
		}
	}
	time.Sleep(3 * time.Second)
	cpu0 := benchd.BusyCPU()
	lat, all, err := burst(ctx, conns)
	cpu := benchd.BusyCPU() - cpu0
	if err != nil {
		b.fail(err, keys...)
		return
	}
	b.res.Set("burst.each", FB, lat)
	b.res.Set("burst.p99", FB, samples{benchd.Quantile(lat, 0.99)})
	b.res.Set("burst.all", FB, samples{ms(all)})
	b.res.Set("burst.cpu", FB, samples{ms(cpu) / float64(len(conns))})
}

// burst sends sdkEchoArgv to every conn at once and returns each call's
// latency from the common start and the time until the last returned.
func burst(ctx context.Context, conns []*client.SandboxConn) (samples, time.Duration, error) {
	return benchd.AtOnce(len(conns), func(i int) error {
		_, err := echoWith(ctx, conns[i], sdkEchoArgv)
		return err
	})
}
