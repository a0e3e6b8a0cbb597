// Package cli implements the forkbox command line: one file per verb, each
// a thin layer over the public Go SDK in package client.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

// Defaults of the global flags.
const (
	defaultAPIURL  = "http://127.0.0.1:3000"
	defaultKeyFile = "/var/lib/forkbox/api-key"
)

// env is what the commands take from the process, injectable by tests.
type env struct {
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	getenv  func(string) string
	keyFile string
}

// app holds the global flags shared by every command.
type app struct {
	env
	apiURL string
	apiKey string
	json   bool
}

// Execute runs the command line in os.Args and returns the process exit code:
// 0 on success, 1 on error, or the remote command's code for exec. SIGINT and
// SIGTERM cancel the command's context.
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, os.Args[1:], env{
		stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr,
		getenv: os.Getenv, keyFile: defaultKeyFile,
	})
}

// run executes one command line and maps its error to an exit code.
func run(ctx context.Context, args []string, e env) int {
	a := &app{env: e}
	root := a.newRoot()
	root.SetArgs(args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	err := root.ExecuteContext(ctx)
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case err != nil:
		fmt.Fprintf(e.stderr, "forkbox: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
		return 1
	}
	return 0
}

// exitError carries a remote command's exit code out of exec without an
// error message.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func (a *app) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "forkbox",
		Short: "Run, persist, clone and roll back gVisor sandboxes for AI agents",
		Long: `forkbox runs isolated Linux sandboxes behind an E2B-compatible API and lets
you pause, snapshot, clone, fork and roll back their whole state (files and memory).

This command talks to a forkbox daemon ("forkbox serve"). The API address and key
come from --api-url / --api-key, else FORKBOX_API_URL / FORKBOX_API_KEY, else
E2B_API_URL / E2B_API_KEY, else ` + defaultAPIURL + ` and the key file ` + defaultKeyFile + `.`,
		Example: `  forkbox sandbox create --template base
  forkbox exec sbx123 -- python3 -c 'print(42)'
  forkbox sandbox clone sbx123 -c 2 --strict --timeout 600
  forkbox lineage sbx123`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.apiURL, "api-url", "", "daemon API URL (env FORKBOX_API_URL, E2B_API_URL; default "+defaultAPIURL+")")
	pf.StringVar(&a.apiKey, "api-key", "", "API key (env FORKBOX_API_KEY, E2B_API_KEY; default: read "+defaultKeyFile+")")
	pf.BoolVar(&a.json, "json", false, "print machine-readable JSON")
	root.AddCommand(a.sandboxCmd(), a.execCmd(), a.filesCmd(), a.snapshotCmd(), a.lineageCmd(), serveCmd(), a.templateCmd(), a.secretCmd(), a.volumeCmd(), a.nodeCmd())
	return root
}

// firstEnv returns the first non-empty environment variable of names.
func (a *app) firstEnv(names ...string) string {
	for _, n := range names {
		if v := a.getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// client builds an SDK client from the global flags and the environment.
func (a *app) client() *client.Client {
	url := a.apiURL
	if url == "" {
		url = a.firstEnv("FORKBOX_API_URL", "E2B_API_URL")
	}
	if url == "" {
		url = defaultAPIURL
	}
	key := a.apiKey
	if key == "" {
		key = a.firstEnv("FORKBOX_API_KEY", "E2B_API_KEY")
	}
	if key == "" && a.keyFile != "" {
		// The daemon writes its key here; readable only by who may use it.
		if b, err := os.ReadFile(a.keyFile); err == nil {
			key = strings.TrimSpace(string(b))
		}
	}
	var opts []client.Option
	if su := a.firstEnv("FORKBOX_SANDBOX_URL", "E2B_SANDBOX_URL"); su != "" {
		opts = append(opts, client.WithSandboxURL(su))
	}
	return client.New(url, key, opts...)
}

// conn opens a data-plane connection to a sandbox, fetching its access
// token first so secure sandboxes work without the caller knowing it.
func (a *app) conn(ctx context.Context, id, user string) (*client.SandboxConn, error) {
	c := a.client()
	info, err := c.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if info.State != "" && info.State != client.StateRunning {
		return nil, fmt.Errorf("sandbox %s is %s; resume it with: forkbox sandbox resume %s", id, info.State, id)
	}
	conn := c.Conn(id, info.EnvdAccessToken)
	if user != "" {
		conn = conn.WithUser(user)
	}
	return conn, nil
}
