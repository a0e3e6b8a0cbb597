// Package agent is forkbox's in-sandbox agent: an envd-compatible server that
// runs as the sandbox's first process and lets E2B SDK clients start
// processes, read and write files and watch directories.
//
// The agent serves, on one TCP listener, the Connect services
// process.Process and filesystem.Filesystem (JSON and binary codecs, HTTP/1.1
// and cleartext HTTP/2) plus envd's plain HTTP routes /health, /init, /envs,
// /metrics and /files. It listens on TCP rather than a unix socket because
// gVisor cannot checkpoint a listening host unix socket.
package agent

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/forkbox/forkbox/api/gen/filesystem/filesystemconnect"
	"github.com/forkbox/forkbox/api/gen/process/processconnect"
)

// Version is the envd version the agent claims to implement. The E2B SDKs
// gate features on it, so it must be at least the version whose behaviour the
// agent provides (octet-stream uploads, watch include_entry, stdin toggle).
const Version = "0.6.4"

// DefaultPort is the TCP port E2B clients expect envd on.
const DefaultPort = 49983

// Config configures an Agent. The zero value is usable: the default user is
// then chosen at request time (see Agent.defaultUser).
type Config struct {
	// DefaultUser is the account processes and file operations use when a
	// request names none and /init has not set one. Empty means "user" if
	// that account exists, else "root".
	DefaultUser string
	// DefaultWorkdir is where relative paths resolve and processes start
	// when /init has not set a workdir. Empty means the acting user's home.
	DefaultWorkdir string
	// EnvVars are extra environment variables for every process, as if set
	// by /init before the first request.
	EnvVars map[string]string
	// AccessToken, when set, is required from the start (as if /init had
	// set it) so a sandbox is never briefly open.
	AccessToken string
	// Logger receives the agent's logs; nil means slog.Default().
	Logger *slog.Logger
	// TrustRoot is the root of the file system whose trust store /init's
	// egress CA goes into; empty means "/" (tests use a directory).
	TrustRoot string
	// ApplyRoot is the root change sets are applied under (POST
	// /forkbox/apply); empty means "/" (tests use a directory).
	ApplyRoot string
	// CommandPool is how many login shells the agent keeps started ahead
	// of time for `/bin/bash -l -c` requests (commands.run); 0 turns the
	// command pool off. POST /init's commandPool overrides it.
	CommandPool int
	// Started, when set, is called after the agent started a process or
	// handed a pooled shell its command (the OOM guard looks at once).
	Started func()
	// MemoryWakesUseful, when set, reports whether the OOM guard would
	// wait for the host's memory wakes of step (oomguard.WantsWakes); nil:
	// it would.
	MemoryWakesUseful func(step uint64) bool
}

// Agent is the in-sandbox server. Create it with New; it is safe for
// concurrent use.
type Agent struct {
	log     *slog.Logger
	state   *initState
	procs   *processTable
	reaper  *reaper
	watches *watcherTable
	cpu     cpuTracker
	handler http.Handler
	started time.Time
	// events are what GET /events hands the daemon for the sandbox's log.
	events *eventRing
	// trustRoot is Config.TrustRoot; egressCA is set once the egress CA
	// is trusted (processes then get NODE_EXTRA_CA_CERTS).
	trustRoot string
	egressCA  atomic.Bool
	// applyRoot is Config.ApplyRoot.
	applyRoot string
	// shells is the command pool (see shellpool.go).
	shells *shellPool
	// onStarted is Config.Started, or a no-op.
	onStarted func()
	// memoryStep is the host's memory-wake step (memwake.go).
	memoryStep atomic.Uint64
	// wakesUseful is Config.MemoryWakesUseful.
	wakesUseful func(step uint64) bool
}

// New builds an Agent from cfg. The first Agent in a process starts the
// process-wide child reaper; there is normally one Agent per sandbox.
func New(cfg Config) *Agent {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	events := &eventRing{}
	a := &Agent{
		log:       slog.New(warnTee{log.Handler(), events}),
		events:    events,
		state:     newInitState(cfg),
		procs:     newProcessTable(),
		reaper:    sharedReaper(),
		watches:   newWatcherTable(),
		started:   time.Now(),
		trustRoot: cfg.TrustRoot,
	}
	a.shells = newShellPool(a, cfg.CommandPool)
	a.onStarted = cfg.Started
	a.wakesUseful = cfg.MemoryWakesUseful
	if a.onStarted == nil {
		a.onStarted = func() {}
	}
	if a.trustRoot == "" {
		a.trustRoot = "/"
	}
	a.applyRoot = cfg.ApplyRoot
	if a.applyRoot == "" {
		a.applyRoot = "/"
	}
	a.handler = a.buildHandler()
	return a
}

// buildHandler mounts both Connect services and the HTTP routes on one mux
// and wraps it in the access-token check.
func (a *Agent) buildHandler() http.Handler {
	mux := http.NewServeMux()
	procPath, procHandler := processconnect.NewProcessHandler(&processService{a: a})
	mux.Handle(procPath, procHandler)
	fsPath, fsHandler := filesystemconnect.NewFilesystemHandler(&filesystemService{a: a})
	mux.Handle(fsPath, fsHandler)
	mux.HandleFunc("GET /health", a.handleHealth)
	mux.HandleFunc("POST /init", a.handleInit)
	mux.HandleFunc("GET /envs", a.handleEnvs)
	mux.HandleFunc("GET /metrics", a.handleMetrics)
	mux.HandleFunc("GET /events", a.handleEvents)
	mux.HandleFunc("GET /files", a.handleDownload)
	mux.HandleFunc("POST /files", a.handleUpload)
	mux.HandleFunc("POST /forkbox/apply", a.handleApply)
	mux.HandleFunc("POST /forkbox/warm", a.handleWarm)
	mux.HandleFunc("POST /forkbox/memory-wake", a.handleMemoryWake)
	return a.withCORS(a.withAuth(mux))
}

// Handler returns the agent's complete HTTP handler (Connect services and
// HTTP routes). Serve it over HTTP/2 as well as HTTP/1.1 so Go clients can
// use bidirectional streams.
func (a *Agent) Handler() http.Handler { return a.handler }

// Serve answers requests on l until ctx is done, then shuts down gracefully
// (waiting up to five seconds for in-flight requests). It serves HTTP/1.1 and
// cleartext HTTP/2 (prior knowledge) on the same listener.
func (a *Agent) Serve(ctx context.Context, l net.Listener) error {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           a.handler,
		Protocols:         &protocols,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return err
}

// Reseed must be called after the sandbox is restored from a checkpoint.
// Clones restored from one image start with identical memory, so any
// process-local random state would repeat across them. The agent keeps
// little: it does not use math/rand, and watcher ids come from crypto/rand,
// which asks the kernel on every call. The one exception, the pooled
// shells' RANDOM seeds (drawn ahead of their commands), is redrawn by the
// pool's renew at the same /init. Reseed is the hook where other such state
// must be refreshed if it is ever added.
func (a *Agent) Reseed() {
	a.log.Debug("reseed after restore: nothing to reseed")
}
