package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/template/dockerfile"
)

// remoteBuildOpts are the flags of `template build NAME`.
type remoteBuildOpts struct {
	dockerfile, image, context string
	startCmd, readyCmd         string
	skipCache                  bool
	cpu, memory                int
}

func addRemoteBuildFlags(cmd *cobra.Command) *remoteBuildOpts {
	o := &remoteBuildOpts{}
	f := cmd.Flags()
	f.StringVarP(&o.dockerfile, "dockerfile", "f", "", "with a name: build from this Dockerfile")
	f.StringVar(&o.image, "image", "", "with a name: build from this image reference (e.g. docker.io/library/debian:bookworm)")
	f.StringVar(&o.context, "context", "", "directory COPY sources are read from (default: the Dockerfile's)")
	f.StringVar(&o.startCmd, "start-cmd", "", "command started in every sandbox of the template (captured running)")
	f.StringVar(&o.readyCmd, "ready-cmd", "", "command polled until it exits 0 before the template is captured")
	f.BoolVar(&o.skipCache, "skip-cache", false, "rebuild every step, ignoring cached layers")
	f.IntVar(&o.cpu, "cpu", 0, "CPU count of the template's sandboxes (0: 2)")
	f.IntVar(&o.memory, "memory", 0, "memory of the template's sandboxes in MiB (0: 1024)")
	return o
}

// templateBuildRemote asks the daemon to build template name and follows
// the build's log until it ends.
func (a *app) templateBuildRemote(cmd *cobra.Command, name string, o *remoteBuildOpts) error {
	ctx := cmd.Context()
	spec, err := o.spec()
	if err != nil {
		return err
	}
	c := a.client()
	t, err := c.RequestTemplateBuild(ctx, name, nil, o.cpu, o.memory)
	if err != nil {
		return err
	}
	if err := a.uploadContexts(ctx, c, t.TemplateID, o.contextDir(), spec.Steps); err != nil {
		return err
	}
	if err := c.StartTemplateBuild(ctx, t.TemplateID, t.BuildID, *spec); err != nil {
		return err
	}
	st, err := a.followBuild(ctx, c, t)
	if err != nil {
		return err
	}
	if a.json {
		if err := a.printJSON(map[string]any{"templateID": t.TemplateID, "buildID": t.BuildID, "names": t.Names, "tags": t.Tags, "status": st.Status, "reason": st.Reason}); err != nil {
			return err
		}
	}
	if st.Status != "ready" {
		msg := "unknown error"
		if st.Reason != nil {
			msg = fmt.Sprintf("step %s: %s", st.Reason.Step, st.Reason.Message)
		}
		return fmt.Errorf("template %s: build failed at %s", name, msg)
	}
	if !a.json {
		fmt.Fprintf(a.stdout, "template %s ready: %s (build %s)\n", name, t.TemplateID, t.BuildID)
	}
	return nil
}

func (o *remoteBuildOpts) contextDir() string {
	if o.context != "" {
		return o.context
	}
	if o.dockerfile != "" {
		return filepath.Dir(o.dockerfile)
	}
	return "."
}

// spec turns the flags into a build: a parsed Dockerfile or an image.
func (o *remoteBuildOpts) spec() (*client.TemplateBuildSpec, error) {
	var spec client.TemplateBuildSpec
	switch {
	case o.dockerfile != "" && o.image != "":
		return nil, errors.New("give --dockerfile or --image, not both")
	case o.dockerfile != "":
		f, err := os.Open(o.dockerfile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		t, err := dockerfile.Parse(f, dockerfile.Options{})
		if err != nil {
			return nil, err
		}
		spec.FromImage, spec.StartCmd, spec.ReadyCmd = t.FromImage, t.StartCmd, t.ReadyCmd
		for _, s := range t.Steps {
			spec.Steps = append(spec.Steps, client.TemplateStep{Type: s.Type, Args: s.Args})
		}
	case o.image != "":
		spec.FromImage = o.image
	default:
		return nil, errors.New("a template build needs --dockerfile or --image")
	}
	if o.startCmd != "" {
		spec.StartCmd, spec.ReadyCmd = o.startCmd, o.readyCmd
	}
	spec.Force = o.skipCache
	if spec.Steps == nil {
		spec.Steps = []client.TemplateStep{}
	}
	return &spec, nil
}

// uploadContexts tars each COPY step's sources, names them by a hash of
// the step and the tar, and uploads those the daemon does not have.
func (a *app) uploadContexts(ctx context.Context, c *client.Client, tplID, dir string, steps []client.TemplateStep) error {
	for i := range steps {
		s := &steps[i]
		if s.Type != dockerfile.StepCopy || len(s.Args) < 2 {
			continue
		}
		data, err := contextTar(dir, s.Args[0])
		if err != nil {
			return fmt.Errorf("COPY %s: %w", s.Args[0], err)
		}
		h := sha256.New()
		fmt.Fprintf(h, "COPY %s\x00", strings.Join(s.Args, "\x00"))
		h.Write(data)
		s.FilesHash = hex.EncodeToString(h.Sum(nil))
		up, err := c.UploadTemplateFiles(ctx, tplID, s.FilesHash, bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return err
		}
		if !a.json {
			how := "already uploaded"
			if up {
				how = fmt.Sprintf("uploaded %d KiB", len(data)>>10)
			}
			fmt.Fprintf(a.stderr, "COPY %s: %s\n", s.Args[0], how)
		}
	}
	return nil
}

// contextTar is a deterministic gzip'd tar of what src (a path or glob
// relative to dir) names, with paths relative to dir.
func contextTar(dir, src string) ([]byte, error) {
	matches, err := filepath.Glob(filepath.Join(dir, src))
	if err != nil || len(matches) == 0 {
		return nil, fmt.Errorf("no files match %q in %s", src, dir)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, m := range matches {
		err := filepath.WalkDir(m, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return addTarEntry(tw, dir, p)
		})
		if err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func addTarEntry(tw *tar.Writer, dir, p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return err
	}
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(p); err != nil {
			return err
		}
	}
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(rel), time.Time{}, 0, 0, "", ""
	h.Format = tar.FormatPAX
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	_, err = tw.Write(b)
	return err
}

// followBuild prints the build's log as it grows and returns the final
// status.
func (a *app) followBuild(ctx context.Context, c *client.Client, t *client.TemplateBuildTicket) (*client.TemplateBuildStatus, error) {
	offset := 0
	for {
		st, err := c.GetTemplateBuildStatus(ctx, t.TemplateID, t.BuildID, offset)
		if err != nil {
			return nil, err
		}
		offset += len(st.LogEntries)
		for _, e := range st.LogEntries {
			if !a.json {
				fmt.Fprintf(a.stderr, "%s %-8s %s\n", e.Timestamp.Local().Format("15:04:05"), "["+e.Step+"]", e.Message)
			}
		}
		if (st.Status == "ready" || st.Status == "error") && len(st.LogEntries) == 0 {
			return st, nil
		}
		if len(st.LogEntries) == 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

func (a *app) templateListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List templates (built in and built by users)",
		Long:    "List every template sandboxes can start from: forkbox's built-in ones and those built with \"forkbox template build NAME\" or an E2B SDK, with their latest build's status.",
		Example: `  forkbox template list --json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := a.client().ListTemplates(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(list)
			}
			fmt.Fprintf(a.stdout, "%-22s %-30s %-9s %4s %6s\n", "TEMPLATE", "NAMES", "STATUS", "CPU", "MEM")
			for _, t := range list {
				fmt.Fprintf(a.stdout, "%-22s %-30s %-9s %4d %6d\n", t.TemplateID, strings.Join(t.Names, ","), t.BuildStatus, t.CPUCount, t.MemoryMB)
			}
			return nil
		},
	}
}

func (a *app) templateDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "delete <template>...",
		Aliases: []string{"rm"},
		Short:   "Delete templates; sandboxes started from them keep running",
		Long:    "Delete user-built templates (or snapshots) by id or name. Their names are freed at once; running and paused sandboxes started from them keep working.",
		Example: `  forkbox template delete myapp`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			for _, id := range args {
				if err := a.client().DeleteTemplate(cmd.Context(), id); err != nil {
					errs = append(errs, fmt.Errorf("delete %s: %w", id, err))
				} else if !a.json {
					fmt.Fprintf(a.stdout, "deleted %s\n", id)
				}
			}
			return errors.Join(errs...)
		},
	}
}
