package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

// secretCmd groups the secret verbs.
func (a *app) secretCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "secret",
		Aliases: []string{"secrets"},
		Short:   "Store values the egress proxy puts into sandboxes' requests",
		Long: `A secret is a named value the daemon keeps encrypted and never shows again.
A network rule's header names it as ${e2b.secrets.NAME}: the egress proxy puts
the secret's current value into each matching request, so the sandbox never
holds it. Updating a secret makes a new version, used from the next request.`,
		Example: `  printf %s "$OPENAI_API_KEY" | forkbox secret create openai-key
  forkbox sandbox network sbx0001 --allow-out api.openai.com --rule 'api.openai.com=Authorization:Bearer ${e2b.secrets.openai-key}'
  forkbox secret update openai-key --value "$NEW_KEY"`,
	}
	cmd.AddCommand(a.secretCreateCmd(), a.secretListCmd(), a.secretInfoCmd(), a.secretUpdateCmd(), a.secretDeleteCmd())
	return cmd
}

// secretValue is --value, or stdin (one trailing newline dropped, as
// `echo` adds one) when the flag is not given.
func (a *app) secretValue(cmd *cobra.Command, value string) (string, error) {
	if cmd.Flags().Changed("value") {
		return value, nil
	}
	b, err := io.ReadAll(io.LimitReader(a.stdin, 64<<10))
	if err != nil {
		return "", fmt.Errorf("read the value from stdin: %w", err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if v == "" {
		return "", fmt.Errorf("no value: pass --value or write it to stdin")
	}
	return v, nil
}

func (a *app) printSecrets(list []client.Secret) error {
	rows := make([][]string, 0, len(list))
	for _, s := range list {
		rows = append(rows, []string{s.SecretID, s.Name, strconv.FormatInt(s.CurrentVersion, 10), orDash(formatKV(s.Metadata)), formatTime(s.UpdatedAt)})
	}
	return table(a.stdout, []string{"SECRET ID", "NAME", "VERSION", "METADATA", "UPDATED"}, rows)
}

func (a *app) printSecret(s *client.Secret) error {
	if a.json {
		return a.printJSON(s)
	}
	return a.printSecrets([]client.Secret{*s})
}
