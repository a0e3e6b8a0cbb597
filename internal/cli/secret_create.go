package cli

import (
	"github.com/spf13/cobra"
)

func (a *app) secretCreateCmd() *cobra.Command {
	var (
		value    string
		metadata []string
	)
	cmd := &cobra.Command{
		Use:   "create <name>",
		Short: "Create a secret (value from --value or stdin)",
		Long: `Create a secret, version 1. Its name is lower-cased; it may not contain '{',
'}' or control characters, nor start with sec_. The value is read from stdin
unless --value is given (stdin keeps it out of the shell's history).`,
		Example: `  printf %s "$TOKEN" | forkbox secret create github-token --metadata owner=ci
  forkbox secret create github-token --value ghp_example --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			md, err := parseKV(metadata)
			if err != nil {
				return err
			}
			v, err := a.secretValue(cmd, value)
			if err != nil {
				return err
			}
			s, err := a.client().CreateSecret(cmd.Context(), args[0], v, md)
			if err != nil {
				return err
			}
			return a.printSecret(s)
		},
	}
	cmd.Flags().StringVar(&value, "value", "", "the value (default: read from stdin)")
	cmd.Flags().StringArrayVar(&metadata, "metadata", nil, "metadata `key=value` (repeatable)")
	return cmd
}
