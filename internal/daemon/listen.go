package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/forkbox/forkbox/internal/sandbox"
)

// listeners are the daemon's bound sockets, opened before start-up
// removes anything so that a daemon whose port is taken changes nothing.
type listeners struct {
	plain net.Listener
	tls   *tlsFront // nil without --tls-listen
}

// listen binds o.Listen and, if set, o.TLSListen.
func listen(o Options) (*listeners, error) {
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	tf, err := listenTLS(o)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &listeners{plain: ln, tls: tf}, nil
}

// close releases the sockets; after serving they are closed already and
// closing again is harmless.
func (l *listeners) close() {
	l.plain.Close()
	l.tls.close()
}

// logLeftRunning says what a stopping daemon leaves on the host: its
// sandboxes keep running (and paused ones stay on disk) by design, so the
// next `forkbox serve` on the data dir reattaches to them.
// pauseGrace bounds how long a stopping daemon waits for the pauses
// requests started: well under systemd's default stop timeout (90 s), and
// far above a pause of a few GiB here.
const pauseGrace = 60 * time.Second

// finishPauses lets the pauses that requests started (and answered at
// once) finish before the daemon exits: a pause cut short leaves a sandbox
// the next start can only report lost.
func finishPauses(ctx context.Context, log *slog.Logger, mgr *sandbox.Manager) {
	n := mgr.InBackground()
	if n == 0 {
		return
	}
	log.Info("forkbox waiting for pauses in progress", "pauses", n, "at_most", pauseGrace)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pauseGrace)
	defer cancel()
	if err := mgr.WaitBackground(wctx); err != nil {
		log.Warn("forkbox stops with pauses unfinished; their sandboxes will be reported lost", "pauses", mgr.InBackground())
	}
}

func logLeftRunning(ctx context.Context, log *slog.Logger, mgr *sandbox.Manager) {
	counts := map[sandbox.PublicState][]string{}
	for _, state := range []sandbox.PublicState{sandbox.PublicRunning, sandbox.PublicPaused} {
		list, _, err := mgr.List(ctx, sandbox.ListFilter{States: []sandbox.PublicState{state}})
		if err != nil {
			log.Warn("forkbox stopped; cannot list the sandboxes it leaves", "err", err)
			return
		}
		for _, sb := range list {
			counts[state] = append(counts[state], sb.ID)
		}
	}
	log.Info("forkbox stopped; sandboxes keep running until killed or until the next serve expires them",
		"running", len(counts[sandbox.PublicRunning]), "paused", len(counts[sandbox.PublicPaused]),
		"running_ids", counts[sandbox.PublicRunning], "paused_ids", counts[sandbox.PublicPaused])
}
