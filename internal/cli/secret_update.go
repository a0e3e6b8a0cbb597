package cli

import (
	"github.com/spf13/cobra"
)

func (a *app) secretUpdateCmd() *cobra.Command {
	var (
		value    string
		metadata []string
	)
	cmd := &cobra.Command{
		Use:   "update <secret-id-or-name>",
		Short: "Store a new version of a secret (value from --value or stdin)",
		Long: `Store a new value as the secret's next version; the egress proxy uses it from
the next request of every sandbox whose rules name the secret. --metadata,
when given, replaces the stored metadata.`,
		Example: `  printf %s "$NEW_TOKEN" | forkbox secret update github-token
  forkbox secret update sec_abc --value v2 --metadata rotated=today`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var md map[string]string
			if cmd.Flags().Changed("metadata") {
				var err error
				if md, err = parseKV(metadata); err != nil {
					return err
				}
				if md == nil {
					md = map[string]string{}
				}
			}
			v, err := a.secretValue(cmd, value)
			if err != nil {
				return err
			}
			s, err := a.client().UpdateSecret(cmd.Context(), args[0], v, md)
			if err != nil {
				return err
			}
			return a.printSecret(s)
		},
	}
	cmd.Flags().StringVar(&value, "value", "", "the new value (default: read from stdin)")
	cmd.Flags().StringArrayVar(&metadata, "metadata", nil, "replace the metadata with `key=value` pairs (repeatable)")
	return cmd
}
