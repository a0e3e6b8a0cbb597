package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// handleHealth answers the SDK's and daemon's liveness probe.
func (a *Agent) handleHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// handleInit applies POST /init: env vars, access token and default
// user/workdir. The daemon calls it after every create and restore; a
// restored clone gets a new token this way (the call must then carry the
// old one, which withAuth checks). The timestamp is accepted but the clock
// is left alone: gVisor's sandbox clock follows the host's.
func (a *Agent) handleInit(w http.ResponseWriter, r *http.Request) {
	var req initRequest
	err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req)
	if err != nil && !errors.Is(err, io.EOF) {
		writeJSONError(w, http.StatusBadRequest, fmt.Errorf("invalid /init body: %w", err))
		return
	}
	if req.DefaultUser != nil && *req.DefaultUser != "" {
		if _, err := lookupAccount(*req.DefaultUser); err != nil {
			writeJSONError(w, http.StatusBadRequest, err)
			return
		}
	}
	if err := linkVolumes(req.Volumes); err != nil {
		// 422: the daemon gives up at once rather than retrying.
		writeJSONError(w, http.StatusUnprocessableEntity, err)
		return
	}
	// What a new process starts with, before this /init changes it: the
	// command pool's ready shells were started with it.
	view, mask := a.spawnView(), cpuMask()
	// A restored sandbox's inotify watches are from before its checkpoint.
	fileStamps.reset()
	if err := applyCPUCount(req.CPUCount); err != nil {
		a.log.Warn("cpu count not applied", "cpu_count", req.CPUCount, "err", err)
	}
	if req.EgressCA != "" {
		// Before the answer: the first command after create must trust it.
		ok, err := installEgressCA(a.trustRoot, []byte(req.EgressCA))
		if err != nil {
			a.log.Warn("egress CA not installed: HTTPS the egress proxy intercepts will fail verification", "err", err)
		}
		a.egressCA.Store(ok)
	}
	a.state.apply(req)
	if req.CommandPool != nil {
		a.shells.resize(*req.CommandPool)
	}
	// Shells started before an /init that changed the environment, user,
	// workdir or CPU mask are stale; otherwise the ready shell an image
	// carried (a warm pool's, a paused sandbox's) serves the first command.
	acct, err := a.namedAccount("")
	if err != nil {
		acct = nil
	}
	a.shells.renew(acct, view != a.spawnView() || mask != cpuMask())
	if acct != nil {
		// Watch and stamp the default user's profile again now, not on
		// the first command's path (namedAccount did the accounts').
		go profileFingerprint(acct.Home)
	}
	a.forgetMemoryWatch()
	// /init follows every restore (resume, clone, rollback): copies of one
	// image must not share random state.
	a.Reseed()
	a.log.Info("init applied", "env_vars", len(req.EnvVars), "token_set", req.AccessToken != nil,
		"default_user", deref(req.DefaultUser), "default_workdir", deref(req.DefaultWorkdir))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// handleEnvs returns the environment variables set through /init.
func (a *Agent) handleEnvs(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, a.state.envs())
}

// handleMetrics reports the sandbox's resource usage in envd's format.
func (a *Agent) handleMetrics(w http.ResponseWriter, r *http.Request) {
	m, err := a.sampleMetrics()
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, m)
}
