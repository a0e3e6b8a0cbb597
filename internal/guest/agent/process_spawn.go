package agent

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/creack/pty"

	pb "github.com/forkbox/forkbox/api/gen/process"
)

// defaultPath is PATH for processes when the agent itself has none (as PID
// 1 it may have been started with an empty environment).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// buildSpawn turns a StartRequest into a command that runs as acct with the
// agent's default environment, /init's variables and the request's own.
func (a *Agent) buildSpawn(req *pb.StartRequest, acct *account) (spawn, error) {
	cfg := req.GetProcess()
	if cfg.GetCmd() == "" {
		return spawn{}, errors.New("process.cmd is required")
	}
	dir, err := a.processDir(cfg, acct)
	if err != nil {
		return spawn{}, err
	}
	env := a.processEnv(acct, cfg.GetEnvs(), req.Pty != nil)
	bin, err := lookPath(cfg.GetCmd(), envValue(env, "PATH"), dir)
	if err != nil {
		return spawn{}, err
	}
	cmd := &exec.Cmd{
		Path: bin,
		Args: append([]string{cfg.GetCmd()}, cfg.GetArgs()...),
		Env:  env,
		Dir:  dir,
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if os.Getuid() == 0 {
		cmd.SysProcAttr.Credential = acct.credential()
	}
	sp := spawn{cmd: cmd, stdin: req.Stdin == nil || req.GetStdin()}
	if req.Pty != nil {
		size := req.GetPty().GetSize()
		sp.ptySize = &pty.Winsize{Cols: uint16(size.GetCols()), Rows: uint16(size.GetRows())}
		// A PTY process leads its own session with the terminal as its
		// controlling tty, so job control and Ctrl+C behave as in a shell.
		cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty = true, true
	} else {
		// Its own process group lets SendSignal reach the whole job.
		cmd.SysProcAttr.Setpgid = true
	}
	return sp, nil
}

// processDir is the working directory: the requested cwd (which must be an
// existing directory), else the default workdir, else "/" when the user's
// home does not exist (system accounts such as nobody).
func (a *Agent) processDir(cfg *pb.ProcessConfig, acct *account) (string, error) {
	if cfg.Cwd != nil && cfg.GetCwd() != "" {
		dir := a.resolvePath(cfg.GetCwd(), acct)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("cwd %q does not exist or is not a directory", dir)
		}
		return dir, nil
	}
	dir := a.workdirFor(acct)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "/", nil
	}
	return dir, nil
}

// processEnv builds the environment: sensible defaults, then /init's
// variables, then the request's, later ones overriding earlier ones.
func (a *Agent) processEnv(acct *account, reqEnvs map[string]string, tty bool) []string {
	env := map[string]string{
		"PATH":    os.Getenv("PATH"),
		"HOME":    acct.Home,
		"USER":    acct.Name,
		"LOGNAME": acct.Name,
		"LANG":    "C.UTF-8",
	}
	if env["PATH"] == "" {
		env["PATH"] = defaultPath
	}
	if tty {
		env["TERM"] = "xterm-256color"
	}
	if a.egressCA.Load() {
		// Node.js trusts its own root list, not the system bundle.
		env["NODE_EXTRA_CA_CERTS"] = EgressCAPath
	}
	maps.Copy(env, a.state.envs())
	maps.Copy(env, reqEnvs)
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// envValue returns the value of key in a KEY=VALUE list.
func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath finds cmd the way the child's shell would: names with a slash
// are used as given (relative to dir), others are searched in the child's
// PATH, not the agent's.
func lookPath(cmd, path, dir string) (string, error) {
	if strings.Contains(cmd, "/") {
		p := cmd
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := checkExecutable(p); err != nil {
			return "", fmt.Errorf("cannot run %q: %w", cmd, err)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		if p := filepath.Join(d, cmd); checkExecutable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("executable %q not found in PATH", cmd)
}

// checkExecutable reports whether p is a regular file with an execute bit.
func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return errors.New("not an executable file")
	}
	return nil
}
