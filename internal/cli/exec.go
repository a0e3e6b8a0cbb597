package cli

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
)

func (a *app) execCmd() *cobra.Command {
	var (
		o       client.ExecOptions
		envs    []string
		noStdin bool
	)
	cmd := &cobra.Command{
		Use:   "exec <sandbox-id> [flags] -- <command> [args...]",
		Short: "Run a command in a sandbox",
		Long: `Run a command in a sandbox, streaming its stdout and stderr as they arrive, and
exit with the command's exit code. The command after "--" runs directly (argv);
--shell runs a command line with "bash -l -c" instead. Standard input is
forwarded when it is not a terminal (a pipe or a file) unless --no-stdin.`,
		Example: `  forkbox exec sbx0001 -- ls -la /home/user
  forkbox exec sbx0001 --user root --cwd /etc -- cat os-release
  forkbox exec sbx0001 --shell 'echo $HOME | tr a-z A-Z'
  echo 'print(6*7)' | forkbox exec sbx0001 -- python3 -`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.Env, err = parseKV(envs); err != nil {
				return err
			}
			o.Cmd = args[1:]
			conn, err := a.conn(cmd.Context(), args[0], "")
			if err != nil {
				return err
			}
			o.Stdout, o.Stderr = a.stdout, a.stderr
			if !noStdin {
				o.Stdin = forwardable(a.stdin)
			}
			code, err := conn.Exec(cmd.Context(), o)
			if err != nil {
				return err
			}
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.User, "user", "u", "", "run as this user (default: the sandbox's default user)")
	f.StringVarP(&o.Cwd, "cwd", "w", "", "working directory (default: the user's home)")
	f.StringArrayVarP(&envs, "env", "e", nil, "environment variable `key=value` (repeatable)")
	f.StringVarP(&o.Shell, "shell", "s", "", "run this command line with bash -l -c")
	f.BoolVar(&noStdin, "no-stdin", false, "do not forward standard input")
	return cmd
}

// forwardable returns r if it should be forwarded as the remote stdin: not a
// terminal (an interactive user would have to type EOF) and not /dev/null.
func forwardable(r io.Reader) io.Reader {
	f, ok := r.(*os.File)
	if !ok {
		return r
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice != 0 {
		return nil
	}
	return f
}
