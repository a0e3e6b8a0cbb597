package server

import (
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"
)

// statusWriter records the status a handler answered with. It unwraps for
// http.ResponseController, so flushing, hijacking (upgrades) and full
// duplex reach the real writer.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	// cause is the error behind a 500, which the client is not told (its
	// text may name host paths) but the daemon's log must say.
	cause error
}

// noteCause records err as the cause of a 500 on the statusWriter under w.
func noteCause(w http.ResponseWriter, err error) {
	for {
		switch v := w.(type) {
		case *statusWriter:
			v.cause = err
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return
		}
	}
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// Flush lets handlers that test for http.Flusher stream through the wrapper.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logRequests logs every request once it is answered: method, path,
// status and duration. Health probes and data-plane traffic log at debug
// level, control calls at info.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		level := slog.LevelInfo
		_, dataPlane, _ := dataPlaneTarget(r)
		if dataPlane || r.URL.Path == "/health" {
			level = slog.LevelDebug
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.String("host", r.Host), slog.Int("status", status),
			slog.Int64("bytes", sw.bytes), slog.Duration("duration", time.Since(start))}
		if sw.cause != nil {
			level = slog.LevelError
			attrs = append(attrs, slog.String("err", sw.cause.Error()))
		}
		s.log.LogAttrs(r.Context(), level, "http request", attrs...)
	})
}

// recoverPanics turns a handler panic (a bug, never bad input) into a 500
// and a logged stack, so one bad request cannot take the daemon down.
// http.ErrAbortHandler keeps its meaning: abort the response silently.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw, ok := w.(*statusWriter)
		if !ok {
			sw = &statusWriter{ResponseWriter: w}
		}
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path,
				"panic", p, "stack", string(debug.Stack()))
			if sw.status == 0 {
				writeStatus(sw, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(sw, r)
	})
}
