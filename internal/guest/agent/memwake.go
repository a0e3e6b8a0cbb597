package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
)

// handleMemoryWake takes the daemon's POST /forkbox/memory-wake
// {"step": bytes}: the host watches the sandbox's memory and posts again
// each time it moved by step (0: it stopped watching). Each post wakes the
// out-of-memory guard (Config.Started), which needs no pace of its own
// while its headroom outlasts a step (MemoryWakeStep). A sandbox too small
// for that (Config.MemoryWakesUseful) answers 410, and the daemon stops.
func (a *Agent) handleMemoryWake(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Step *uint64 `json:"step"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil || req.Step == nil {
		writeJSONError(w, http.StatusBadRequest, fmt.Errorf("invalid memory-wake body: want {\"step\": bytes}"))
		return
	}
	announce := *req.Step != a.memoryStep.Load()
	if announce && *req.Step > 0 && a.wakesUseful != nil && !a.wakesUseful(*req.Step) {
		// 410: the daemon stops watching; the guard paces itself.
		a.memoryStep.Store(0)
		writeJSONError(w, http.StatusGone, fmt.Errorf("the out-of-memory guard of a sandbox this small paces itself"))
		return
	}
	a.memoryStep.Store(*req.Step)
	a.onStarted()
	w.WriteHeader(http.StatusNoContent)
}

// forgetMemoryWatch is /init's part: a new incarnation. The host's memory
// watch of the old one is gone and this one's announces itself once armed;
// until then the OOM guard keeps its own pace. A guard that waited for the
// old watch's wakes sleeps for up to 5 s, blind to a hog the first command
// starts (a code interpreter's cell filled 1 GiB before the new watch
// armed, in 3 of 6 creates): wake it, so it looks now and sets its pace.
func (a *Agent) forgetMemoryWatch() {
	if a.memoryStep.Swap(0) != 0 {
		a.onStarted()
	}
}

// MemoryWakeStep is how far the sandbox's memory may move before the host
// wakes the guard again, 0 when the host does not.
func (a *Agent) MemoryWakeStep() uint64 { return a.memoryStep.Load() }

// Logger is the agent's logger: its warnings also go into the sandbox's
// event log (GET /events), where the daemon collects them.
func (a *Agent) Logger() *slog.Logger { return a.log }
