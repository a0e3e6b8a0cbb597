package codeinterp

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// forkboxBashKernel is the Bash kernel: ipykernel's Kernel over an
// interactive bash driven by metakernel's replwrap (E2B's bash_kernel,
// which does the same with pexpect's, is on PyPI only).
//
//go:embed forkbox_bash_kernel.py
var forkboxBashKernel []byte

// forkboxJavaKernel is the Java kernel's protocol side: ipykernel's Kernel
// over forkboxJShell (E2B's IJava comes from GitHub releases only).
//
//go:embed forkbox_java_kernel.py
var forkboxJavaKernel []byte

// forkboxJShell runs Java cells with the JDK's jdk.jshell API; java starts
// it from source (JEP 330), so nothing is compiled ahead.
//
//go:embed ForkboxJShell.java
var forkboxJShell []byte

// rSpec is R via Debian's r-cran-irkernel, the kernel E2B runs for R.
var rSpec = &kernelSpec{
	name: langR,
	argv: func(s *Server, connFile string) ([]string, error) {
		return []string{s.cfg.R, "--slave", "-e", "IRkernel::main()", "--args", connFile}, nil
	},
	setEnv: func(vars map[string]string) string { return rSetenv(vars) },
	// The previous values wait in an option, outside the user's names.
	scopedEnv: func(vars map[string]string) (string, string) {
		setup := "options(forkbox.env = Sys.getenv(" + rVector(sortedKeys(vars)) + ", unset = NA, names = TRUE))\n" + rSetenv(vars)
		restore := "local({o <- getOption('forkbox.env'); options(forkbox.env = NULL)\n" +
			"for (k in names(o)) if (is.na(o[[k]])) Sys.unsetenv(k) else do.call(Sys.setenv, structure(list(o[[k]]), names = k))})"
		return setup, restore
	},
}

// rSetenv is R code setting vars; JSON string syntax is valid R.
func rSetenv(vars map[string]string) string {
	parts := make([]string, 0, len(vars))
	for _, k := range sortedKeys(vars) {
		parts = append(parts, string(mustJSON(k))+" = "+string(mustJSON(vars[k])))
	}
	return "Sys.setenv(" + strings.Join(parts, ", ") + ")"
}

func rVector(items []string) string { return "c(" + strings.Trim(string(mustJSON(items)), "[]") + ")" }

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// bashSpec is the Bash kernel (forkboxBashKernel) over cfg.Bash.
var bashSpec = &kernelSpec{
	name:    langBash,
	helpers: map[string][]byte{"forkbox_bash_kernel.py": forkboxBashKernel},
	argv: func(s *Server, connFile string) ([]string, error) {
		return []string{s.cfg.Python, filepath.Join(filepath.Dir(connFile), "forkbox_bash_kernel.py"), "-f", connFile}, nil
	},
	argvEnv: func(s *Server) []string { return []string{"FORKBOX_BASH=" + s.cfg.Bash} },
	// A name a shell cannot hold is skipped in the base environment, as
	// envd skips it; in a cell's env_vars it fails the cell (export says
	// why).
	setEnv: func(vars map[string]string) string {
		var b strings.Builder
		for _, k := range sortedKeys(vars) {
			if envName.MatchString(k) {
				fmt.Fprintf(&b, "export %s=%s\n", k, bashQuote(vars[k]))
			}
		}
		return b.String()
	},
	// The previous values wait in shell variables named after the index
	// of the variable, so any name (even one bash rejects) is safe to use.
	scopedEnv: func(vars map[string]string) (string, string) {
		var set, restore strings.Builder
		for i, k := range sortedKeys(vars) {
			fmt.Fprintf(&set, "if [ -n \"${%[1]s+x}\" ]; then __fb_o_%[2]d=$%[1]s; __fb_h_%[2]d=1; else __fb_h_%[2]d=0; fi\nexport %[1]s=%[3]s\n",
				k, i, bashQuote(vars[k]))
			fmt.Fprintf(&restore, "if [ \"$__fb_h_%[2]d\" = 1 ]; then export %[1]s=\"$__fb_o_%[2]d\"; else unset %[1]s; fi\nunset __fb_o_%[2]d __fb_h_%[2]d\n", k, i)
		}
		return set.String(), restore.String()
	},
}

// javaSpec is Java via the JDK's jdk.jshell (forkboxJavaKernel).
var javaSpec = &kernelSpec{
	name:    langJava,
	helpers: map[string][]byte{"forkbox_java_kernel.py": forkboxJavaKernel, "ForkboxJShell.java": forkboxJShell},
	argv: func(s *Server, connFile string) ([]string, error) {
		return []string{s.cfg.Python, filepath.Join(filepath.Dir(connFile), "forkbox_java_kernel.py"), "-f", connFile}, nil
	},
	argvEnv: func(s *Server) []string { return []string{"FORKBOX_JAVA=" + s.cfg.Java} },
	// The kernel applies these itself: a JVM cannot change its environment
	// from Java code.
	setEnv: func(vars map[string]string) string { return "%forkbox_env_set " + string(mustJSON(vars)) },
	scopedEnv: func(vars map[string]string) (string, string) {
		return "%forkbox_env_push " + string(mustJSON(vars)), "%forkbox_env_pop"
	},
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
