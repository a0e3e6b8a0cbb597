package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func (a *app) volumeLsCmd() *cobra.Command {
	var depth int
	cmd := &cobra.Command{
		Use:     "ls <volume> [path]",
		Long:    "List a directory of a volume (by id or name), --depth levels deep.",
		Short:   "List a volume's directory",
		Example: `  forkbox volume ls data / --depth 2`,
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := a.volumeFiles(cmd, args[0])
			if err != nil {
				return err
			}
			p := "/"
			if len(args) == 2 {
				p = args[1]
			}
			ents, err := f.List(cmd.Context(), p, depth)
			if err != nil {
				return err
			}
			return a.printVolumeEntries(ents)
		},
	}
	cmd.Flags().IntVar(&depth, "depth", 1, "levels to descend")
	return cmd
}

func (a *app) volumeReadCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "read <volume> <path>",
		Long:    "Write a volume's file to stdout, streamed.",
		Short:   "Write a volume's file to stdout",
		Example: `  forkbox volume read data /notes.txt > notes.txt`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := a.volumeFiles(cmd, args[0])
			if err != nil {
				return err
			}
			rd, err := f.Read(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			defer rd.Close()
			_, err = io.Copy(a.stdout, rd)
			return err
		},
	}
}

func (a *app) volumeWriteCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "write <volume> <path>",
		Short:   "Write stdin to a volume's file",
		Long:    "Write stdin to a volume's file, replacing it and making missing parent directories.",
		Example: `  forkbox volume write data /notes.txt < notes.txt`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := a.volumeFiles(cmd, args[0])
			if err != nil {
				return err
			}
			e, err := f.Write(cmd.Context(), args[1], cmd.InOrStdin())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(e)
			}
			_, err = fmt.Fprintf(a.stdout, "wrote %s (%d bytes)\n", e.Path, e.Size)
			return err
		},
	}
}

func (a *app) volumeRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm <volume> <path>",
		Long:    "Remove a volume's file or directory (recursively). The volume's root cannot be removed.",
		Short:   "Remove a volume's file or directory (recursively)",
		Example: `  forkbox volume rm data /old`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := a.volumeFiles(cmd, args[0])
			if err != nil {
				return err
			}
			if err := f.Remove(cmd.Context(), args[1]); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"path": args[1], "removed": true})
			}
			_, err = fmt.Fprintf(a.stdout, "removed %s\n", args[1])
			return err
		},
	}
}

func (a *app) volumeMkdirCmd() *cobra.Command {
	var parents bool
	cmd := &cobra.Command{
		Use:     "mkdir <volume> <path>",
		Long:    "Make a directory in a volume, owned by 1000:1000 (E2B's default user).",
		Short:   "Make a directory in a volume",
		Example: `  forkbox volume mkdir data /a/b -p`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := a.volumeFiles(cmd, args[0])
			if err != nil {
				return err
			}
			e, err := f.MakeDir(cmd.Context(), args[1], parents)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(e)
			}
			_, err = fmt.Fprintf(a.stdout, "made %s\n", e.Path)
			return err
		},
	}
	cmd.Flags().BoolVarP(&parents, "parents", "p", false, "make missing parent directories too")
	return cmd
}
