package server

import (
	"log/slog"
	"net/http"
	"time"
)

// NewHTTPServer returns an http.Server for h (normally Server.Handler())
// with limits fit for the daemon: a bounded header read so idle clients
// cannot hold connections, and no read or write timeout, because data-plane
// streams (process output, watchers, WebSockets) live as long as they need.
// Errors of the net/http machinery go to log at warn level.
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	if log == nil {
		log = slog.Default()
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
