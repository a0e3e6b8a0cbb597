package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

func octal(m uint32) string { return fmt.Sprintf("%04o", m) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func (a *app) volumeCreateCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "create <name>",
		Short:   "Create an empty volume",
		Long:    "Create an empty volume. Names are unique: volumeMounts name volumes.",
		Example: `  forkbox volume create data`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.client().CreateVolume(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(v)
			}
			_, err = fmt.Fprintln(a.stdout, v.ID)
			return err
		},
	}
}

func (a *app) volumeListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Long:    "List every volume: id and name (tokens: volume info).",
		Aliases: []string{"ls-volumes"},
		Short:   "List volumes",
		Example: `  forkbox volume list --json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			vs, err := a.client().ListVolumes(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(vs)
			}
			rows := make([][]string, 0, len(vs))
			for _, v := range vs {
				rows = append(rows, []string{v.ID, v.Name})
			}
			return table(a.stdout, []string{"VOLUME ID", "NAME"}, rows)
		},
	}
}

func (a *app) volumeInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "info <volume>",
		Long:    "Show a volume (by id or name) and its content-API token.",
		Short:   "Show a volume and its content-API token",
		Example: `  forkbox volume info data`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.client().GetVolume(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(v)
			}
			_, err = fmt.Fprintf(a.stdout, "id:    %s\nname:  %s\ntoken: %s\n", v.ID, v.Name, v.Token)
			return err
		},
	}
}

func (a *app) volumeDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "delete <volume-id>",
		Short:   "Delete a volume and its files",
		Long:    "Delete a volume and its files. It fails (409) while a sandbox mounts it.",
		Example: `  forkbox volume delete vol0001`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.client().DeleteVolume(cmd.Context(), args[0]); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"volumeID": args[0], "deleted": true})
			}
			_, err := fmt.Fprintf(a.stdout, "deleted %s\n", args[0])
			return err
		},
	}
}
