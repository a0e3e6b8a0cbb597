package cli

import (
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/forkbox/forkbox/client"
)

func (a *app) sandboxCreateCmd() *cobra.Command {
	var (
		o                               client.CreateOptions
		timeout                         int
		metadata, envs, vols, iamTokens []string
		autoResum                       bool
		image                           string
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Start a sandbox from a template or snapshot",
		Long: `Start a sandbox. --template accepts a template name or id, or a snapshot id:
a sandbox created from a snapshot continues from that state, volumes mounted again.`,
		Example: `  forkbox sandbox create
  forkbox sandbox create --template snap0042 --timeout 600 --metadata owner=me --env DEBUG=1
  forkbox sandbox create --auto-pause --secure --json
  forkbox sandbox create --volume data:/mnt/data
  forkbox sandbox create --image docker.io/library/debian:bookworm
  forkbox sandbox create --iam-token aws=sts.amazonaws.com`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			err := parseCreateFlags(&o, metadata, envs, vols, iamTokens)
			if err != nil {
				return err
			}
			o.Timeout = time.Duration(timeout) * time.Second
			o.AutoResume = autoResum
			if image != "" {
				// Cold start from an image: a template of it is built (pulled and
				// cached once) and the sandbox starts from that (sandbox_image.go).
				if o.TemplateID, err = a.imageTemplate(cmd, image); err != nil {
					return err
				}
			}
			sb, err := a.client().CreateSandbox(cmd.Context(), o)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(sb)
			}
			return a.printSandboxes([]*client.Sandbox{sb})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.TemplateID, "template", "t", "base", "template name or id, or snapshot id")
	f.IntVar(&timeout, "timeout", 300, "time to live in seconds")
	f.StringArrayVar(&metadata, "metadata", nil, "metadata `key=value` (repeatable)")
	f.StringArrayVar(&envs, "env", nil, "environment variable `key=value` for every command (repeatable)")
	lifecycleFlags(f, &o, &autoResum)
	f.StringArrayVar(&vols, "volume", nil, "mount volume `name:/path` read-write (repeatable)")
	f.StringVar(&image, "image", "", "start from this OCI image (pulled and made a template once), not a template")
	f.StringArrayVar(&iamTokens, "iam-token", nil, "workload identity token `NAME=AUDIENCE` (JWT-SVID) that rules may name as ${e2b.identity.tokens.NAME} (repeatable)")
	sizeFlags(f, &o)
	return cmd
}

// parseCreateFlags reads --metadata, --env, --volume and --iam-token into o.
func parseCreateFlags(o *client.CreateOptions, metadata, envs, vols, iamTokens []string) error {
	var err error
	if o.Metadata, err = parseKV(metadata); err != nil {
		return err
	}
	if o.EnvVars, err = parseKV(envs); err != nil {
		return err
	}
	if o.VolumeMounts, err = parseVolumeMounts(vols); err != nil {
		return err
	}
	o.IAM, err = parseIAM(iamTokens)
	return err
}

// parseIAM reads --iam-token NAME=AUDIENCE flags (nil: none).
func parseIAM(flags []string) (*client.IAM, error) {
	kv, err := parseKV(flags)
	if err != nil || len(kv) == 0 {
		return nil, err
	}
	iam := &client.IAM{Tokens: map[string]client.IAMToken{}}
	for name, aud := range kv {
		iam.Tokens[name] = client.IAMToken{Audience: aud, TokenType: client.JWTSVID}
	}
	return iam, nil
}

// lifecycleFlags adds the flags of a new sandbox's pause, resume and
// data-plane access.
func lifecycleFlags(f *pflag.FlagSet, o *client.CreateOptions, autoResume *bool) {
	f.BoolVar(&o.AutoPause, "auto-pause", false, "pause instead of kill when the timeout expires")
	f.BoolVar(&o.AutoPauseFilesOnly, "auto-pause-files-only", false, "with --auto-pause: keep only the files (the resume cold-boots)")
	f.BoolVar(autoResume, "auto-resume", false, "resume automatically when traffic arrives while paused")
	f.BoolVar(&o.Secure, "secure", false, "require the sandbox access token on the data plane")
}

// sizeFlags adds the flags that size a new sandbox.
func sizeFlags(f *pflag.FlagSet, o *client.CreateOptions) {
	f.IntVar(&o.CPUCount, "cpu", 0, "number of vCPUs (0: server default)")
	f.IntVar(&o.MemoryMB, "memory", 0, "memory in MiB (0: server default)")
	f.IntVar(&o.DiskSizeMB, "disk", 0, "size of / and /tmp in MiB (0: the template's; a snapshot's is its own)")
}
