package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// templateTagCmds are "template tag", "template untag" and "template tags".
func (a *app) templateTagCmds() []*cobra.Command {
	return []*cobra.Command{a.templateTagCmd(), a.templateUntagCmd(), a.templateTagsCmd()}
}

func (a *app) templateTagCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "tag <name[:tag]> <new-tag>...",
		Short: "Make tags name a template's build",
		Long: `Make the tags name the build that name:tag names (a bare name: its latest
ready build). A tag another build of the template had moves; sandboxes
created by name:new-tag start from that build from now on.`,
		Example: `  forkbox template tag myapp:v1 production stable
  forkbox template tag myapp latest --json`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := a.client().AssignTemplateTags(cmd.Context(), args[0], args[1:])
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(out)
			}
			fmt.Fprintf(a.stdout, "build %s tagged %v\n", out.BuildID, out.Tags)
			return nil
		},
	}
}

func (a *app) templateUntagCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "untag <name> <tag>...",
		Short:   "Remove tags from a template",
		Long:    "Remove the tags from the template called name; name:tag no longer starts a sandbox. A tag the template does not have is an error and nothing is removed.",
		Example: `  forkbox template untag myapp staging`,
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.client().RemoveTemplateTags(cmd.Context(), args[0], args[1:]); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"name": args[0], "removed": args[1:]})
			}
			fmt.Fprintf(a.stdout, "removed %v from %s\n", args[1:], args[0])
			return nil
		},
	}
}

func (a *app) templateTagsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "tags <template>",
		Short:   "List a template's tags and the builds they name",
		Long:    "List the tags of a user-built template (by id or name), each with the build it names and when it was assigned.",
		Example: `  forkbox template tags myapp --json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tags, err := a.client().ListTemplateTags(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(tags)
			}
			fmt.Fprintf(a.stdout, "%-20s %-38s %s\n", "TAG", "BUILD", "ASSIGNED")
			for _, t := range tags {
				fmt.Fprintf(a.stdout, "%-20s %-38s %s\n", t.Tag, t.BuildID, t.CreatedAt.Format(time.RFC3339))
			}
			return nil
		},
	}
}
