package agent

import (
	"context"
	"net/http"
	"time"

	pb "github.com/forkbox/forkbox/api/gen/process"
)

// warmCmd is what POST /forkbox/warm starts: a process that only starts
// and exits.
const warmCmd = "/bin/true"

// handleWarm starts warmCmd as the default user the way a command would
// be started, waits for it to end and answers 204. The daemon calls it on
// a sandbox it restored ahead of time (its pool), before any create takes
// it: a restored sandbox maps its agent's code, the spawn path's files and
// the dynamic loader again on first use, and a create's first command
// otherwise pays for that (create → first output). The process is no
// command: it is in no process list and no event. Then it fills the
// command pool, so the create's first commands.run finds a ready login
// shell (the create's /init keeps it when it changes nothing a new process
// starts with).
func (a *Agent) handleWarm(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if err := a.warmUp(ctx); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *Agent) warmUp(ctx context.Context) error {
	acct, err := a.namedAccount("")
	if err != nil {
		return err
	}
	sp, err := a.buildSpawn(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: warmCmd}}, acct)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	p := &managedProc{events: newBroadcaster()}
	p.onEnd = func(*pb.ProcessEvent_EndEvent) { close(done) }
	if err := p.start(a.reaper, sp, 5*time.Second); err != nil {
		return err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if a.shells.enabled() {
		a.shells.fillFor(acct)
	}
	return nil
}
