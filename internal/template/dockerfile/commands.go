package dockerfile

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// command converts one instruction of the stage.
func (c *converter) command(cmd instructions.Command) error {
	// Expand $VARS where Docker does (not in RUN/CMD: the shell does that).
	if ex, ok := cmd.(instructions.SupportsSingleWordExpansion); ok {
		if err := ex.Expand(c.expand); err != nil {
			return fmt.Errorf("%v: %w", err, errdefs.ErrInvalidArgument)
		}
	}
	switch cmd := cmd.(type) {
	case *instructions.RunCommand:
		return c.run(cmd)
	case *instructions.CopyCommand:
		if cmd.From != "" {
			return fmt.Errorf("COPY --from (another stage or image) is %w", errUnsupported)
		}
		return c.copy(cmd.SourcesAndDest, cmd.Chown, cmd.Chmod)
	case *instructions.AddCommand:
		for _, src := range cmd.SourcePaths {
			if strings.Contains(src, "://") || strings.HasPrefix(src, "git@") {
				return fmt.Errorf("ADD of a URL (%s) is %w: download it with RUN", src, errUnsupported)
			}
		}
		return c.copy(cmd.SourcesAndDest, cmd.Chown, cmd.Chmod)
	case *instructions.EnvCommand:
		return c.envStep(cmd.Env)
	case *instructions.ArgCommand:
		return c.arg(cmd)
	case *instructions.WorkdirCommand:
		c.workdir, c.workdirSet = c.resolveWorkdir(cmd.Path), true
		c.emit(StepWorkdir, c.workdir)
	case *instructions.UserCommand:
		if cmd.User == "" {
			return fmt.Errorf("no user: %w", errdefs.ErrInvalidArgument)
		}
		c.userSet = true
		c.emit(StepUser, cmd.User)
	case *instructions.CmdCommand:
		c.cmd = &cmd.ShellDependantCmdLine
	case *instructions.EntrypointCommand:
		c.entrypoint = &cmd.ShellDependantCmdLine
		c.cmd = nil // Docker: ENTRYPOINT resets an earlier CMD
	case *instructions.ExposeCommand, *instructions.VolumeCommand, *instructions.LabelCommand,
		*instructions.MaintainerCommand, *instructions.StopSignalCommand, *instructions.HealthCheckCommand:
		c.warn(nil, fmt.Sprintf("line %d: %s is ignored", line(cmd.Location()), strings.ToUpper(cmd.Name())))
	default: // SHELL, ONBUILD: they change how later builds run
		return fmt.Errorf("the instruction is %w", errUnsupported)
	}
	return nil
}

func (c *converter) run(cmd *instructions.RunCommand) error {
	if len(cmd.FlagsUsed) > 0 {
		return fmt.Errorf("RUN --%s is %w", cmd.FlagsUsed[0], errUnsupported)
	}
	script := shellCommand(cmd.ShellDependantCmdLine)
	if strings.TrimSpace(script) == "" {
		return fmt.Errorf("empty command: %w", errdefs.ErrInvalidArgument)
	}
	c.emit(StepRun, script)
	return nil
}

// shellCommand is the shell command line an instruction runs: the shell
// form as written (heredocs included), the exec form quoted word by word.
func shellCommand(cl instructions.ShellDependantCmdLine) string {
	if !cl.PrependShell {
		return shellJoin(cl.CmdLine)
	}
	cmd := strings.Join(cl.CmdLine, " ")
	if len(cl.Files) == 1 && strings.HasPrefix(strings.TrimSpace(cmd), "<<") && !strings.Contains(cmd, " ") {
		return cl.Files[0].Data // RUN <<EOF: the heredoc is the script
	}
	for _, f := range cl.Files {
		cmd += "\n" + f.Data + f.Name
	}
	return cmd
}

// copy makes one COPY step per source, like the E2B SDK.
func (c *converter) copy(sd instructions.SourcesAndDest, chown, chmod string) error {
	if len(sd.SourceContents) > 0 {
		return fmt.Errorf("inline (heredoc) sources are %w: write the file with RUN", errUnsupported)
	}
	mode := ""
	if chmod != "" {
		m, err := strconv.ParseUint(chmod, 8, 32)
		if err != nil || m > 0o7777 {
			return fmt.Errorf("--chmod=%s: want an octal mode: %w", chmod, errdefs.ErrInvalidArgument)
		}
		mode = fmt.Sprintf("%04o", m)
	}
	dest := sd.DestPath
	if !path.IsAbs(dest) {
		// Relative to the WORKDIR, keeping a trailing slash (a directory).
		slash := strings.HasSuffix(dest, "/")
		dest = path.Join(c.workdir, dest)
		if slash && dest != "/" {
			dest += "/"
		}
	}
	for _, src := range sd.SourcePaths {
		if err := checkSource(src); err != nil {
			return err
		}
		c.emit(StepCopy, src, dest, chown, mode)
	}
	return nil
}

// checkSource refuses a COPY source outside the build context.
func checkSource(src string) error {
	clean := path.Clean(src)
	if path.IsAbs(src) || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("source %q is outside the build context: %w", src, errdefs.ErrInvalidArgument)
	}
	return nil
}

func (c *converter) envStep(env instructions.KeyValuePairs) error {
	args := make([]string, 0, 2*len(env))
	for _, kv := range env {
		if !envName.MatchString(kv.Key) {
			return fmt.Errorf("variable name %q: %w", kv.Key, errdefs.ErrInvalidArgument)
		}
		args = append(args, kv.Key, kv.Value)
		c.set(kv.Key, kv.Value)
	}
	if len(args) > 0 {
		c.emit(StepEnv, args...)
	}
	return nil
}

// arg keeps ARG as ENV (with its default, a --build-arg, or ""), as the
// E2B SDK does, so later steps and sandboxes see it.
func (c *converter) arg(cmd *instructions.ArgCommand) error {
	var env instructions.KeyValuePairs
	for _, kv := range cmd.Args {
		env = append(env, instructions.KeyValuePair{Key: kv.Key, Value: c.argValue(kv)})
	}
	return c.envStep(env)
}

// startCmd combines ENTRYPOINT and CMD the way a container runtime does.
func (c *converter) startCmd() string {
	switch {
	case c.entrypoint == nil && c.cmd == nil:
		return ""
	case c.entrypoint == nil:
		return shellCommand(*c.cmd)
	case c.entrypoint.PrependShell || c.cmd == nil:
		return shellCommand(*c.entrypoint) // a shell-form ENTRYPOINT ignores CMD
	case c.cmd.PrependShell:
		return shellCommand(*c.entrypoint) + " " + shellJoin([]string{"/bin/sh", "-c", strings.Join(c.cmd.CmdLine, " ")})
	default:
		return shellJoin(append(append([]string{}, c.entrypoint.CmdLine...), c.cmd.CmdLine...))
	}
}

// shellJoin quotes words for sh so it splits them back exactly.
func shellJoin(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellQuote(w)
	}
	return strings.Join(q, " ")
}

func shellQuote(w string) string {
	if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
