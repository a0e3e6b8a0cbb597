// Command forkbox-agent is the in-sandbox agent: it runs as the sandbox's
// first process and serves the envd-compatible API that E2B SDKs use.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/forkbox/forkbox/internal/guest/agent"
	"github.com/forkbox/forkbox/internal/guest/codeinterp"
	"github.com/forkbox/forkbox/internal/guest/oomguard"
)

func main() {
	addr := flag.String("addr", fmt.Sprintf("0.0.0.0:%d", agent.DefaultPort), "TCP address to listen on")
	level := flag.String("log-level", "info", "log level: debug, info, warn or error")
	codeAddr := flag.String("code-addr", fmt.Sprintf("0.0.0.0:%d", codeinterp.DefaultPort), "TCP address of the code interpreter (empty disables it)")
	codePrewarm := flag.Bool("code-prewarm", false, "start the default Python context at boot (and register the JavaScript one)")
	prewarmJS := flag.Bool("code-prewarm-js", false, "with --code-prewarm, start the default JavaScript context's kernel at boot too (else on its first cell)")
	commandPool := flag.Int("command-pool", 1, "login shells kept started ahead of time for `bash -l -c` commands (0 turns the command pool off; /init's commandPool overrides it)")
	flag.Parse()
	if err := run(*addr, *level, *codeAddr, codeinterp.Config{Prewarm: *codePrewarm, PrewarmJS: *prewarmJS}, *commandPool); err != nil {
		fmt.Fprintln(os.Stderr, "forkbox-agent:", err)
		os.Exit(1)
	}
}

func run(addr, level, codeAddr string, code codeinterp.Config, commandPool int) error {
	agent.CloseInheritedOnExec()
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("bad --log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	// Before anything is started: nothing the agent starts may hold it.
	if err := agent.KeepResourceCapability(); err != nil {
		return err
	}
	// As PID 1, SIGTERM and SIGINT have no default action, so handle them
	// explicitly to shut down cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Info("forkbox-agent listening", "addr", l.Addr().String(), "envd_version", agent.Version, "pid", os.Getpid())
	// gVisor fails and kills nothing when the sandbox's memory runs out;
	// the guard does, so a memory hog fails or dies instead of the whole
	// sandbox. The code interpreter hears of it first, so a kernel that
	// dies of it says why.
	// The guard sleeps while nothing but the agent's own idle processes
	// exist (agent.Quiet) and looks at once when the agent starts one, or
	// when the host says the sandbox's memory grew (agent.MemoryWakeStep).
	wake := make(chan struct{}, 1)
	started := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	guard := oomguard.Options{Logger: log, Wake: wake}
	if codeAddr != "" {
		envdURL := ""
		if ta, ok := l.Addr().(*net.TCPAddr); ok {
			envdURL = fmt.Sprintf("http://127.0.0.1:%d", ta.Port)
		}
		code.Logger, code.EnvdURL, code.Started = log, envdURL, started
		s := codeinterp.New(code)
		guard.Acting = func(a oomguard.Act) { s.NoteOutOfMemory(a.PGID) }
		go serveCode(ctx, log, s, codeAddr)
	}
	if err := agent.ReserveTasks(); err != nil {
		log.Warn("task limit reserve", "err", err)
	}
	a := agent.New(agent.Config{Logger: log, CommandPool: commandPool, Started: started,
		MemoryWakesUseful: func(step uint64) bool { return oomguard.WantsWakes(guard, step) }})
	guard.Quiet = a.Quiet
	guard.Logger = a.Logger()
	guard.HostStep = a.MemoryWakeStep
	go oomguard.Run(ctx, guard)
	return a.Serve(ctx, l)
}

// serveCode runs the code interpreter beside envd; its failure is logged
// but never takes the agent down.
func serveCode(ctx context.Context, log *slog.Logger, s *codeinterp.Server, addr string) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("code interpreter disabled", "err", err)
		return
	}
	log.Info("code interpreter listening", "addr", l.Addr().String())
	if err := s.Serve(ctx, l); err != nil {
		log.Error("code interpreter stopped", "err", err)
	}
}
