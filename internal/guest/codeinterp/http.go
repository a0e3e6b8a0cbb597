package codeinterp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// keepaliveInterval is how long an execution stream may stay silent before
// a {"type":"keepalive"} line is written (as E2B's server does), so a client
// that vanished without closing its connection is noticed and its cell
// interrupted.
var keepaliveInterval = 5 * time.Second

// executeRequest is the body of POST /execute.
type executeRequest struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// createContextRequest is the body of POST /contexts.
type createContextRequest struct {
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.warm:
		writeJSON(w, http.StatusOK, "OK")
	default:
		writeJSON(w, http.StatusServiceUnavailable, "warming up")
	}
}

func (s *Server) handleExecute(w http.ResponseWriter, r *http.Request) {
	var req executeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "invalid request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if req.ContextID != "" && req.Language != "" {
		http.Error(w, "Only one of context_id or language can be provided", http.StatusBadRequest)
		return
	}
	var c *codeContext
	var err error
	if req.ContextID != "" {
		c, err = s.lookup(req.ContextID)
	} else {
		c, err = s.defaultContext(r.Context(), req.Language)
	}
	if err != nil {
		s.writeError(w, req.ContextID, err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	sw := newStreamWriter(w, cancel)
	defer sw.stop()
	cell := cellRequest{Code: req.Code, EnvVars: req.EnvVars}
	if err := c.execute(ctx, cell, r.Header.Get("X-Access-Token"), sw.emit); err != nil {
		s.log.Warn("code interpreter: execution failed", "context", c.ID, "err", err)
		var ee *execError
		if errors.As(err, &ee) {
			sw.emit(errorEvent(ee.Name, ee.Value, ""))
		} else {
			sw.emit(errorEvent("ExecutionError", err.Error(), ""))
		}
	}
	sw.emit([]byte(`{"type":"end_of_execution"}`))
}

func (s *Server) handleCreateContext(w http.ResponseWriter, r *http.Request) {
	var req createContextRequest
	if r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "invalid request body: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	c, err := s.createContext(r.Context(), req.Language, req.Cwd)
	if err != nil {
		s.writeError(w, "", err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) handleListContexts(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.list())
}

func (s *Server) handleRestartContext(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, err := s.lookup(id)
	if err == nil {
		err = c.restart(r.Context())
	}
	if err != nil {
		s.writeError(w, id, err)
		return
	}
	writeJSON(w, http.StatusOK, nil)
}

func (s *Server) handleDeleteContext(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.remove(id); err != nil {
		s.writeError(w, id, err)
		return
	}
	writeJSON(w, http.StatusOK, nil)
}

// writeError answers with E2B's plain-text errors: 404 for an unknown
// context, 400 for a bad request, 500 when a worker cannot start.
func (s *Server) writeError(w http.ResponseWriter, id string, err error) {
	switch {
	case errors.Is(err, errNotFound):
		http.Error(w, fmt.Sprintf("Context %s not found", id), http.StatusNotFound)
	case errors.Is(err, errUnsupportedLanguage), errors.Is(err, errBadDir):
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		s.log.Warn("code interpreter: request failed", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// errorEvent builds an E2B error event.
func errorEvent(name, value, traceback string) []byte {
	return mustJSON(struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Value     string `json:"value"`
		Traceback string `json:"traceback"`
	}{"error", name, value, traceback})
}

// streamWriter writes execution events as newline-delimited JSON, flushing
// each one, and writes keepalives while the cell is silent. A failed write
// means the client is gone: it cancels the execution (interrupting the cell)
// and drops everything after.
type streamWriter struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	rc     *http.ResponseController
	cancel context.CancelFunc
	last   time.Time
	failed bool
	done   chan struct{}
}

func newStreamWriter(w http.ResponseWriter, cancel context.CancelFunc) *streamWriter {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sw := &streamWriter{w: w, rc: http.NewResponseController(w), cancel: cancel, last: time.Now(), done: make(chan struct{})}
	sw.rc.Flush()
	go sw.keepalive()
	return sw
}

func (sw *streamWriter) emit(line []byte) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.failed {
		return
	}
	sw.last = time.Now()
	_, err := sw.w.Write(append(line, '\n'))
	if err == nil {
		err = sw.rc.Flush()
	}
	if err != nil {
		sw.failed = true
		sw.cancel()
	}
}

func (sw *streamWriter) keepalive() {
	t := time.NewTicker(keepaliveInterval / 5)
	defer t.Stop()
	for {
		select {
		case <-sw.done:
			return
		case <-t.C:
		}
		sw.mu.Lock()
		idle := time.Since(sw.last) >= keepaliveInterval
		sw.mu.Unlock()
		if idle {
			sw.emit([]byte(`{"type":"keepalive"}`))
		}
	}
}

// stop ends keepalives; later emits are dropped, since the handler is
// returning and the ResponseWriter must not be used after that.
func (sw *streamWriter) stop() {
	close(sw.done)
	sw.mu.Lock()
	sw.failed = true
	sw.mu.Unlock()
}
