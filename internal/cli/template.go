package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// TemplateBuildFunc builds the base template for "forkbox template build";
// cmd/forkbox sets it, like ServeFunc, so the CLI does not import the
// daemon's internals.
var TemplateBuildFunc func(cmd *cobra.Command, args []string) error

func (a *app) templateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "template",
		Short: "Manage the templates sandboxes start from",
		Long:  "Manage the templates sandboxes start from. Templates are built on the daemon's host.",
		Example: `  forkbox template build
  forkbox template build myapp:v1 -f Dockerfile
  forkbox template build web --image docker.io/library/nginx:latest
  forkbox template list`,
	}
	var bo *remoteBuildOpts
	build := &cobra.Command{
		Use:     "build [name[:tag]]",
		Aliases: []string{"create"},
		Short:   "Build a template from a Dockerfile or an image (without a name: the base template's rootfs)",
		Long: `Build the base template: a Debian bookworm root filesystem made with
debootstrap from the host's configured Debian mirror, with the forkbox agent
installed. It is cached; a second run only refreshes the agent binary.
"forkbox serve" does the same at start, this verb lets you do it ahead of time.

With a name, the daemon builds a template of that name instead (E2B's
"template create"): from a Dockerfile (-f; FROM, RUN, COPY/ADD of local files,
ENV, ARG, WORKDIR, USER, CMD/ENTRYPOINT) or an image (--image), each step a
cached layer, showing progress (step n/m, cache hits, pull progress) as it goes.`,
		Example: `  forkbox template build
  forkbox template build --template-dir /var/lib/forkbox/templates --agent bin/forkbox-agent
  forkbox template build myapp:v1 -f Dockerfile --context .
  forkbox template create web --image docker.io/library/python:3.12-slim --start-cmd 'python3 -m http.server 8080' --ready-cmd 'curl -sf localhost:8080'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return a.templateBuildRemote(cmd, args[0], bo)
			}
			if TemplateBuildFunc == nil {
				return errors.New("template build is not available in this build")
			}
			return TemplateBuildFunc(cmd, args)
		},
	}
	bo = addRemoteBuildFlags(build)
	f := build.Flags()
	f.String("data-dir", "/var/lib/forkbox", "forkbox's data directory")
	f.String("template-dir", "", "directory of the cached templates (default <data-dir>/templates)")
	f.String("agent", "", "path of the forkbox-agent binary (default: next to forkbox)")
	cmd.AddCommand(build, a.templateListCmd(), a.templateDeleteCmd(), a.templateLogsCmd())
	cmd.AddCommand(a.templateTagCmds()...)
	return cmd
}
