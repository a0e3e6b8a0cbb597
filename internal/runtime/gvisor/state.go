package gvisor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// ociState is the part of runsc's `state` / `list --format=json` output the
// runtime uses.
type ociState struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Pid    int    `json:"pid"`
}

// runscState returns runsc's state of id. A container runsc does not know
// (never started, or gone after a checkpoint) is reported as stopped.
func (r *Runtime) runscState(ctx context.Context, id string) (ociState, error) {
	out, err := r.run(ctx, r.cfg.Timeout/5, "state", id)
	if errdefs.IsNotFound(err) {
		return ociState{ID: id, Status: "stopped"}, nil
	}
	if err != nil {
		return ociState{}, err
	}
	var st ociState
	if err := json.Unmarshal(out, &st); err != nil {
		return ociState{}, fmt.Errorf("decode runsc state of %s: %v: %w", id, err, errdefs.ErrInternal)
	}
	return reapedView(st), nil
}

// reapedView reports a sandbox whose process has exited but is not reaped
// yet as stopped. runsc counts a zombie as alive; its parent (init, after
// `runsc create` exited) may take a second to reap it, e.g. after a
// checkpoint that stopped the sandbox.
func reapedView(st ociState) ociState {
	if st.Status == "stopped" || st.Pid <= 0 {
		return st
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(st.Pid) + "/stat")
	if err != nil {
		st.Status = "stopped"
		return st
	}
	// The state is the first field after the parenthesised command name.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X') {
		st.Status = "stopped"
	}
	return st
}

// waitStopped polls until id is stopped or timeout passes.
func (r *Runtime) waitStopped(ctx context.Context, id string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		st, err := r.runscState(ctx, id)
		if err == nil && st.Status == "stopped" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox %s did not stop (%v): %w", id, err, errdefs.ErrUnavailable)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// runscList returns the state of every container runsc knows, by id.
func (r *Runtime) runscList(ctx context.Context) (map[string]ociState, error) {
	out, err := r.run(ctx, r.cfg.Timeout/5, "list", "--format=json")
	if err != nil {
		return nil, err
	}
	var list []ociState
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("decode runsc list: %v: %w", err, errdefs.ErrInternal)
	}
	m := make(map[string]ociState, len(list))
	for _, st := range list {
		m[st.ID] = reapedView(st)
	}
	return m, nil
}

// toInfo merges a handle with runsc's state. A sandbox killed for exceeding
// a limit (trap 7) is simply stopped: the sandbox's exit, not a backend
// error.
func toInfo(h handle, st ociState) runtime.Info {
	info := runtime.Info{ID: h.ID, Addr: h.Addr, CreatedAt: h.CreatedAt, State: runtime.StateStopped}
	switch st.Status {
	case "created":
		info.State = runtime.StateCreated
	case "running":
		info.State = runtime.StateRunning
	case "paused":
		info.State = runtime.StatePaused
	}
	if info.State != runtime.StateStopped {
		info.Pid = st.Pid
	}
	return info
}
