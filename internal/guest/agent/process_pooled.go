package agent

import (
	"fmt"
	"time"

	pb "github.com/forkbox/forkbox/api/gen/process"
)

// startPooled runs req through a pooled shell when one matches, else
// starts sp fresh. Either way a poolable request makes the pool refill
// (after done is closed or a short delay, and not before busy, the
// daemon's hint that the host serves other sandboxes that long, has passed).
func (a *Agent) startPooled(p *managedProc, req *pb.StartRequest, acct *account, sp spawn, timeout, busy time.Duration, done <-chan struct{}) error {
	defer a.onStarted()
	cmd, ok := poolable(req)
	if !ok || !a.shells.enabled() {
		return p.start(a.reaper, sp, timeout)
	}
	defer a.shells.refillAfter(done, busy)
	if sh := a.shells.take(req, acct, sp); sh != nil {
		err := p.adopt(sh, cmd, sp.stdin, timeout)
		if err == nil {
			return nil
		}
		a.log.Warn("command pool: hand-over failed, starting fresh", "err", err)
	}
	return p.start(a.reaper, sp, timeout)
}

// adopt makes the waiting shell sh run cmd as this process.
func (p *managedProc) adopt(sh *pooledShell, cmd string, stdin bool, timeout time.Duration) error {
	if err := sh.handOver(cmd, stdin); err != nil {
		sh.closeAll()
		return fmt.Errorf("pooled shell %d: %w", sh.pid, err)
	}
	if stdin {
		p.stdin = sh.stdin
	} else {
		sh.stdin.Close()
	}
	sh.stdin = nil
	p.pid = uint32(sh.pid)
	if p.onStart != nil {
		p.onStart()
	}
	go p.run(sh.fwd, p.readAll(outputs{stdout: sh.stdout, stderr: sh.stderr}), timeout)
	return nil
}
