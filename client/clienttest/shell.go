package clienttest

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/forkbox/forkbox/api/gen/process"
)

// run interprets a command. `bash -c` / `sh -c` scripts are split on ';' and
// on whitespace (no quoting). Builtins:
//
//	echo ARGS…      ARGS to stdout
//	echoerr ARGS…   ARGS to stderr
//	cat             stdin to stdout
//	whoami          the user from the Basic auth header ("user" by default)
//	pwd             the working directory ("/home/user" by default)
//	printenv NAME   a variable from the request or the sandbox's envVars (from /init)
//	exit N          stop with exit code N
//
// Anything else prints "fake: command not found" and exits 127.
func (a *agent) run(cfg *process.ProcessConfig, user string, stdin io.Reader, stdout, stderr io.Writer) int {
	argv := append([]string{cfg.GetCmd()}, cfg.GetArgs()...)
	if script, ok := shellScript(argv); ok {
		code := 0
		for _, part := range strings.Split(script, ";") {
			fields := strings.Fields(part)
			if len(fields) == 0 {
				continue
			}
			var exited bool
			code, exited = a.builtin(cfg, user, fields, stdin, stdout, stderr)
			if exited {
				break
			}
		}
		return code
	}
	code, _ := a.builtin(cfg, user, argv, stdin, stdout, stderr)
	return code
}

// shellScript returns the script of "bash [-l] -c SCRIPT".
func shellScript(argv []string) (string, bool) {
	switch strings.TrimPrefix(argv[0], "/bin/") {
	case "bash", "sh":
	default:
		return "", false
	}
	for i, a := range argv[:len(argv)-1] {
		if a == "-c" {
			return argv[i+1], true
		}
	}
	return "", false
}

// builtin runs one command and reports its code and whether it was exit.
func (a *agent) builtin(cfg *process.ProcessConfig, user string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, bool) {
	switch argv[0] {
	case "echo":
		fmt.Fprintln(stdout, strings.Join(argv[1:], " "))
	case "echoerr":
		fmt.Fprintln(stderr, strings.Join(argv[1:], " "))
	case "cat":
		_, _ = io.Copy(stdout, stdin)
	case "whoami":
		fmt.Fprintln(stdout, orDefault(user, "user"))
	case "pwd":
		fmt.Fprintln(stdout, orDefault(cfg.GetCwd(), "/home/user"))
	case "printenv":
		if len(argv) > 1 {
			fmt.Fprintln(stdout, a.env(cfg, argv[1]))
		}
	case "exit":
		code := 0
		if len(argv) > 1 {
			code, _ = strconv.Atoi(argv[1])
		}
		return code, true
	default:
		fmt.Fprintf(stderr, "fake: command not found: %s\n", argv[0])
		return 127, false
	}
	return 0, false
}

func (a *agent) env(cfg *process.ProcessConfig, name string) string {
	if v, ok := cfg.GetEnvs()[name]; ok {
		return v
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.envVars[name]
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
