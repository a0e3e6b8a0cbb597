package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

// volumeCmd groups the volume verbs.
func (a *app) volumeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "volume",
		Aliases: []string{"volumes", "vol"},
		Short:   "Create, inspect and delete volumes and their files",
		Long: `A volume is named persistent storage with a size limit (the daemon's
--volume-size). Sandboxes mount it at create (E2B's volumeMounts); it
outlives every sandbox that used it. Its files are also reachable without a
sandbox (ls, read, write, rm, mkdir), through the volume's own token.`,
		Example: `  forkbox volume create data
  forkbox volume write data /notes.txt < notes.txt
  forkbox volume ls data /`,
	}
	cmd.AddCommand(a.volumeCreateCmd(), a.volumeListCmd(), a.volumeInfoCmd(), a.volumeDeleteCmd(),
		a.volumeLsCmd(), a.volumeReadCmd(), a.volumeWriteCmd(), a.volumeRmCmd(), a.volumeMkdirCmd())
	return cmd
}

// volumeFiles finds volume idOrName (with its token) and returns its
// content API.
func (a *app) volumeFiles(cmd *cobra.Command, idOrName string) (*client.VolumeFiles, error) {
	c := a.client()
	v, err := c.GetVolume(cmd.Context(), idOrName)
	if err != nil {
		return nil, err
	}
	return c.VolumeFiles(*v), nil
}

func (a *app) printVolumeEntries(list []client.VolumeEntry) error {
	if a.json {
		return a.printJSON(list)
	}
	rows := make([][]string, 0, len(list))
	for _, e := range list {
		rows = append(rows, []string{e.Type, octal(e.Mode), itoa(int64(e.UID)) + ":" + itoa(int64(e.GID)), itoa(e.Size), formatTime(e.Mtime), e.Path})
	}
	return table(a.stdout, []string{"TYPE", "MODE", "OWNER", "SIZE", "MODIFIED", "PATH"}, rows)
}

// parseVolumeMounts parses --volume name:/path flags.
func parseVolumeMounts(flags []string) ([]client.VolumeMount, error) {
	var out []client.VolumeMount
	for _, f := range flags {
		name, p, ok := strings.Cut(f, ":")
		if !ok || name == "" || !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("--volume %q: want name:/path", f)
		}
		out = append(out, client.VolumeMount{Name: name, Path: p})
	}
	return out, nil
}
