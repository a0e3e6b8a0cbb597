package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// TemplateBuildFunc builds the base template for "forkbox template build";
// cmd/forkbox sets it, like ServeFunc, so the CLI does not import the
// daemon's internals.
var TemplateBuildFunc func(cmd *cobra.Command, args []string) error

func templateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "template",
		Short:   "Manage the templates sandboxes start from",
		Long:    "Manage the templates sandboxes start from. Templates are built on the daemon's host.",
		Example: `  forkbox template build`,
	}
	build := &cobra.Command{
		Use:   "build",
		Short: "Build (once) the base template's Debian root filesystem",
		Long: `Build the base template: a Debian bookworm root filesystem made with
debootstrap from the host's configured Debian mirror, with the forkbox agent
installed. It is cached; a second run only refreshes the agent binary.
"forkbox serve" does the same at start, this verb lets you do it ahead of time.`,
		Example: `  forkbox template build
  forkbox template build --template-dir /var/lib/forkbox/templates --agent bin/forkbox-agent`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if TemplateBuildFunc == nil {
				return errors.New("template build is not available in this build")
			}
			return TemplateBuildFunc(cmd, args)
		},
	}
	f := build.Flags()
	f.String("data-dir", "/var/lib/forkbox", "forkbox's data directory")
	f.String("template-dir", "", "directory of the cached templates (default <data-dir>/templates)")
	f.String("agent", "", "path of the forkbox-agent binary (default: next to forkbox)")
	cmd.AddCommand(build)
	return cmd
}
