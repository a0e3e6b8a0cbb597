// Temporary stand-in for cmd/forkbox while it is being written (deleted before hand-off).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/forkbox/forkbox/internal/daemon"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "usage: serve")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	var o daemon.Options
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:3000", "")
	fs.StringVar(&o.DataDir, "data-dir", "", "")
	fs.StringVar(&o.TemplateDir, "template-dir", "", "")
	fs.StringVar(&o.RunscPath, "runsc", "", "")
	fs.StringVar(&o.AgentPath, "agent", "", "")
	fs.DurationVar(&o.SweepInterval, "sweep-interval", time.Second, "")
	fs.Parse(os.Args[2:])
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := daemon.Run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
