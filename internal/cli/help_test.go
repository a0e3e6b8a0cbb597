package cli

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// commands returns every command below root, depth first.
func commands(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, c := range root.Commands() {
		out = append(out, c)
		out = append(out, commands(c)...)
	}
	return out
}

func TestHelpEveryCommand(t *testing.T) {
	root := (&app{}).newRoot()
	for _, c := range append([]*cobra.Command{root}, commands(root)...) {
		path := strings.Fields(c.CommandPath())[1:]
		t.Run(strings.Join(append([]string{"forkbox"}, path...), "_"), func(t *testing.T) {
			if !strings.HasPrefix(c.CommandPath(), "forkbox completion") {
				if c.Short == "" || c.Long == "" || c.Example == "" {
					t.Errorf("%q lacks Short, Long or Example", c.CommandPath())
				}
			}
			want := c.Long
			if want == "" {
				want = c.Short
			}
			r := runCLI(t, nil, nil, append(path, "--help")...)
			if r.code != 0 || !strings.Contains(r.stdout, "Usage:") || !strings.Contains(r.stdout, want) {
				t.Errorf("--help: code %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}
		})
	}
}

func TestServe(t *testing.T) {
	old := ServeFunc
	t.Cleanup(func() { ServeFunc = old })

	ServeFunc = nil
	if r := runCLI(t, nil, nil, "serve"); r.code != 1 || !strings.Contains(r.stderr, "not available") {
		t.Errorf("serve without ServeFunc: %+v", r)
	}

	var got struct {
		listen, dataDir string
		sweep, timeout  time.Duration
	}
	ServeFunc = func(cmd *cobra.Command, args []string) error {
		f := cmd.Flags()
		got.listen, _ = f.GetString("listen")
		got.dataDir, _ = f.GetString("data-dir")
		got.sweep, _ = f.GetDuration("sweep-interval")
		got.timeout, _ = f.GetDuration("default-timeout")
		for _, name := range []string{"domain", "runsc", "agent", "log-level"} {
			if f.Lookup(name) == nil {
				return errors.New("missing flag " + name)
			}
		}
		return nil
	}
	if r := runCLI(t, nil, nil, "serve", "--listen", ":9999", "--sweep-interval", "2s"); r.code != 0 {
		t.Fatalf("serve: %+v", r)
	}
	if got.listen != ":9999" || got.dataDir != "/var/lib/forkbox" || got.sweep != 2*time.Second || got.timeout != 300*time.Second {
		t.Errorf("flags seen by ServeFunc: %+v", got)
	}
}
