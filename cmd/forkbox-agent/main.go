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

	"github.com/forkbox/forkbox/internal/agent"
)

func main() {
	addr := flag.String("addr", fmt.Sprintf("0.0.0.0:%d", agent.DefaultPort), "TCP address to listen on")
	level := flag.String("log-level", "info", "log level: debug, info, warn or error")
	flag.Parse()
	if err := run(*addr, *level); err != nil {
		fmt.Fprintln(os.Stderr, "forkbox-agent:", err)
		os.Exit(1)
	}
}

func run(addr, level string) error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("bad --log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	// As PID 1, SIGTERM and SIGINT have no default action, so handle them
	// explicitly to shut down cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Info("forkbox-agent listening", "addr", l.Addr().String(), "envd_version", agent.Version, "pid", os.Getpid())
	a := agent.New(agent.Config{Logger: log})
	return a.Serve(ctx, l)
}
