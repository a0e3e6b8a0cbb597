// Package codeinterp is forkbox's stateful code interpreter: an HTTP server,
// compatible with E2B's code-interpreter API (port 49999), that runs code in
// long-lived per-context kernels inside the sandbox.
//
// Python contexts run Debian's IPython kernel (ipykernel); the server speaks
// the Jupyter messaging protocol to it over ZeroMQ on loopback
// (github.com/go-zeromq/zmq4, pure Go) and maps the messages to E2B's
// /execute events. Every piece of interpreter state lives in those kernel
// processes (and a bash process for bash contexts), and the connections
// between server and kernels never leave the sandbox, so a checkpoint
// captures all of it: contexts survive pause/resume, snapshots, clones and
// rollbacks without any host-side bookkeeping.
//
// Routes: POST /execute streams newline-delimited JSON events; POST and GET
// /contexts, POST /contexts/{id}/restart and DELETE /contexts/{id} manage
// contexts; GET /health reports liveness.
package codeinterp

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"sync"
	"time"
)

// DefaultPort is the TCP port E2B clients expect the code interpreter on.
const DefaultPort = 49999

// Config configures a Server. The zero value is usable.
type Config struct {
	// Logger receives the server's logs; nil means slog.Default().
	Logger *slog.Logger
	// Python is the interpreter for Python contexts (default "python3").
	Python string
	// Bash is the shell for bash contexts (default "bash").
	Bash string
	// R is R's interpreter, which runs IRkernel (default "R").
	R string
	// Java is the JDK's java launcher for Java contexts (default "java").
	Java string
	// IJavaScript is npm's ijavascript kernel for JavaScript and
	// TypeScript contexts (default "ijskernel"), run by Node.
	IJavaScript string
	// Node is Node.js, which runs ijavascript (default "node").
	Node string
	// WorkDir is the default working directory of new contexts. Empty means
	// the default user's home directory (/home/user in templates).
	WorkDir string
	// DefaultUser is the account workers run as. Empty means "user" if that
	// account exists, else the server's own account.
	DefaultUser string
	// EnvdURL, when set, is envd's base URL (e.g. http://127.0.0.1:49983).
	// Like E2B, the environment variables envd reports at /envs are applied
	// to a context on its first execution.
	EnvdURL string
	// Started, when set, is called after a kernel process started (the
	// OOM guard looks at once).
	Started func()
	// InterruptGrace is how long an interrupted cell may take to stop
	// before its worker is killed and restarted (default 10s).
	InterruptGrace time.Duration
	// Prewarm starts the default Python context when Serve starts, so a
	// template checkpoint already holds a running interpreter.
	Prewarm bool
	// PrewarmJS also starts the default JavaScript context's kernel (an
	// ijavascript kernel and its Node.js session, ~40 MiB) at boot, as
	// E2B's interpreter does. When false, the prewarm only registers that
	// context (it is listed, with its id) and its kernel starts on its
	// first cell, which then pays the start (~0.5 s).
	PrewarmJS bool
}

// Server is the code-interpreter server. Create it with New; it is safe for
// concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	handler http.Handler

	mu       sync.Mutex
	contexts map[string]*codeContext // guarded by mu
	order    []string                // context ids in creation order; guarded by mu
	defaults map[string]string       // language -> default context id; guarded by mu
	defMu    sync.Mutex              // serialises creating default contexts

	// warm is closed once the prewarm (if any) has finished; /health
	// answers 503 before, so whoever takes a template image of this sandbox
	// (the daemon waits for /health) captures a ready interpreter.
	warm chan struct{}
}

// New builds a Server from cfg.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Python == "" {
		cfg.Python = "python3"
	}
	if cfg.Bash == "" {
		cfg.Bash = "bash"
	}
	if cfg.R == "" {
		cfg.R = "R"
	}
	if cfg.Java == "" {
		cfg.Java = "java"
	}
	if cfg.IJavaScript == "" {
		cfg.IJavaScript = "ijskernel"
	}
	if cfg.Node == "" {
		cfg.Node = "node"
	}
	if cfg.InterruptGrace <= 0 {
		cfg.InterruptGrace = 10 * time.Second
	}
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		contexts: map[string]*codeContext{},
		defaults: map[string]string{},
		warm:     make(chan struct{}),
	}
	if !cfg.Prewarm {
		close(s.warm)
	}
	s.handler = s.buildHandler()
	return s
}

func (s *Server) buildHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.HandleFunc("POST /execute", s.handleExecute)
	mux.HandleFunc("POST /contexts", s.handleCreateContext)
	mux.HandleFunc("GET /contexts", s.handleListContexts)
	mux.HandleFunc("POST /contexts/{id}/restart", s.handleRestartContext)
	mux.HandleFunc("DELETE /contexts/{id}", s.handleDeleteContext)
	return withCORS(mux)
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve answers requests on l until ctx is done, then shuts down (waiting up
// to five seconds for in-flight requests) and stops every worker.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if s.cfg.Prewarm {
		go s.prewarm(ctx)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		s.Close()
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	s.Close()
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return err
}

// prewarm starts the default Python context and runs one trivial cell in
// it, so the execution path (not only the interpreter's start) is warm;
// then, as E2B's interpreter does, the default JavaScript context when its
// kernel is installed. Other languages start on first use.
func (s *Server) prewarm(ctx context.Context) {
	defer close(s.warm)
	for _, lang := range []string{langPython, langJavaScript} {
		if lang == langJavaScript {
			if _, err := exec.LookPath(s.cfg.IJavaScript); err != nil {
				continue
			}
		}
		if lang == langJavaScript && !s.cfg.PrewarmJS {
			if _, err := s.defaultContextLazy(lang); err != nil {
				s.log.Warn("code interpreter: prewarm failed", "language", lang, "err", err)
			}
			continue
		}
		c, err := s.defaultContext(ctx, lang)
		if err == nil {
			err = c.execute(ctx, cellRequest{Code: "pass", noEnvd: true, silent: true}, "", func([]byte) {})
		}
		if err != nil {
			s.log.Warn("code interpreter: prewarm failed", "language", lang, "err", err)
		}
	}
}

// Close stops every context's worker and removes the worker script. The
// server stays usable: later requests start new workers.
func (s *Server) Close() {
	s.mu.Lock()
	ctxs := make([]*codeContext, 0, len(s.contexts))
	for _, c := range s.contexts {
		ctxs = append(ctxs, c)
	}
	s.contexts = map[string]*codeContext{}
	s.order = nil
	s.defaults = map[string]string{}
	s.mu.Unlock()
	for _, c := range ctxs {
		c.close()
	}
}

// withCORS lets browser clients call the API, as E2B's server does.
func withCORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "*")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}
