package codeinterp

import (
	_ "embed"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// ipythonStartup runs in every IPython kernel at start and loads
// forkboxIPython from the same directory.
//
//go:embed ipython_startup.py
var ipythonStartup []byte

// forkboxIPython sets up E2B's display behaviour: a DataFrame's
// "e2b/data", a matplotlib figure's "e2b/chart", PIL images shown, saved
// or returned as png.
//
//go:embed forkbox_ipython.py
var forkboxIPython []byte

// forkboxCharts is the matplotlib → chart extractor (E2B's e2b-charts
// format), importable in the kernel as forkbox_charts.
//
//go:embed forkbox_charts.py
var forkboxCharts []byte

// kernelSpec describes how to run one language's Jupyter kernel and how
// to express the server's bookkeeping (environment variables) in it.
type kernelSpec struct {
	name string
	// argv returns the kernel's command line for the connection file;
	// the helpers are next to it.
	argv func(s *Server, connFile string) ([]string, error)
	// helpers are files (name → content) the kernel's command line uses,
	// written next to the connection file before it starts.
	helpers map[string][]byte
	// env is added to the kernel's environment.
	env []string
	// argvEnv, when set, is more environment taken from the server's
	// configuration.
	argvEnv func(s *Server) []string
	// setEnv is code that sets vars in the kernel's environment for good.
	setEnv func(vars map[string]string) string
	// scopedEnv is code that sets vars and code that gives them back the
	// values (or absence) they had before.
	scopedEnv func(vars map[string]string) (setup, restore string)
	// countsSilent marks kernels that count (and echo) silent executions,
	// so the server's bookkeeping must ride along with the user's cells.
	countsSilent bool
	// transform, when set, turns a user's cell into the kernel's language.
	transform func(code string) (string, error)
	// interruptMessage interrupts a cell with one interrupt_request on the
	// shell channel instead of SIGINTs to the process group: the kernel
	// (forkbox_ijs_kernel.js) signals its session while, and only while,
	// the cell runs, so no SIGINT outlives the cell to stop the next one.
	interruptMessage bool
}

// forkboxKernel starts ipykernel as ipykernel_launcher does, without jedi
// and debugpy and with output flushes that cost one IOPub task, not two.
//
//go:embed forkbox_kernel.py
var forkboxKernel []byte

// pythonSpec is IPython via Debian's python3-ipykernel.
var pythonSpec = &kernelSpec{
	name: langPython,
	helpers: map[string][]byte{
		"forkbox_kernel.py": forkboxKernel, "startup.py": ipythonStartup,
		"forkbox_ipython.py": forkboxIPython, "forkbox_charts.py": forkboxCharts,
	},
	argv: func(s *Server, connFile string) ([]string, error) {
		dir := filepath.Dir(connFile)
		return []string{
			s.cfg.Python, filepath.Join(dir, "forkbox_kernel.py"), "-f", connFile,
			// No colours, so tracebacks arrive as plain text (E2B's
			// ipython_kernel_config.py does the same), and no truncation
			// of long sequences in text/plain.
			"--InteractiveShell.colors=NoColor",
			"--PlainTextFormatter.max_seq_length=0",
			"--IPKernelApp.exec_files=" + filepath.Join(dir, "startup.py"),
			// History lives in memory (In, Out, _i still work): no SQLite
			// file and no writer thread, and clones cannot share a file.
			"--HistoryManager.enabled=False",
			// ipykernel sleeps 0.5 ms before each reply, "to mitigate"
			// clients that miss output sent just before it; under gVisor
			// that sleep costs several ms, and the code interpreter waits
			// for the idle status, which follows all output, anyway.
			"--IPythonKernel._execute_sleep=0",
		}, nil
	},
	env: []string{"MPLBACKEND=module://matplotlib_inline.backend_inline", "PYTHONUNBUFFERED=1"},
	setEnv: func(vars map[string]string) string {
		return "__import__('os').environ.update(" + string(mustJSON(vars)) + ")"
	},
	// The previous values wait in an attribute of sys, outside the user's
	// namespace.
	scopedEnv: func(vars map[string]string) (string, string) {
		setup := "__import__('sys')._forkbox_env = {k: __import__('os').environ.get(k) for k in " +
			string(mustJSON(sortedKeys(vars))) + "}\n" +
			"__import__('os').environ.update(" + string(mustJSON(vars)) + ")"
		restore := "[__import__('os').environ.pop(k, None) if v is None else __import__('os').environ.__setitem__(k, v)" +
			" for k, v in __import__('sys').__dict__.pop('_forkbox_env', {}).items()]"
		return setup, restore
	},
}

// bashQuote quotes s for a POSIX shell.
func bashQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// jsEnvSaved is where a JavaScript kernel keeps the variables a cell's
// env_vars replaced, outside the user's names.
const jsEnvSaved = "globalThis[Symbol.for('forkbox.env')]"

// forkboxIJSKernel and forkboxIJSSession are preloaded into ijavascript's
// kernel and session processes: an interrupt stops the running cell and
// keeps the session (ijavascript alone restarts it), and a session process
// that dies takes its kernel with it (ijavascript alone hangs).
var (
	//go:embed forkbox_ijs_kernel.js
	forkboxIJSKernel []byte
	//go:embed forkbox_ijs_session.js
	forkboxIJSSession []byte
)

// javascriptSpec is Node.js via npm's ijavascript (the kernel E2B forks for
// JavaScript), which speaks ZeroMQ through npm's zeromq module.
var javascriptSpec = &kernelSpec{
	name:             langJavaScript,
	countsSilent:     true, // jp-kernel ignores "silent"
	interruptMessage: true,
	helpers:          map[string][]byte{"forkbox_ijs_kernel.js": forkboxIJSKernel, "forkbox_ijs_session.js": forkboxIJSSession},
	argv: func(s *Server, connFile string) ([]string, error) {
		// Node runs ijavascript's kernel.js by its path (a PATH name is
		// resolved here; a path is taken as it is).
		kernelJS := s.cfg.IJavaScript
		if !filepath.IsAbs(kernelJS) {
			var err error
			if kernelJS, err = exec.LookPath(kernelJS); err != nil {
				return nil, fmt.Errorf("ijavascript kernel: %w", err)
			}
		}
		preload := filepath.Join(filepath.Dir(connFile), "forkbox_ijs_kernel.js")
		return []string{s.cfg.Node, "--require", preload, kernelJS, "--hide-undefined", "--protocol=5.1", connFile}, nil
	},
	transform: transformJavaScript,
	setEnv: func(vars map[string]string) string {
		return "Object.assign(process.env, " + string(mustJSON(vars)) + ")"
	},
	scopedEnv: func(vars map[string]string) (string, string) {
		setup := jsEnvSaved + " = Object.fromEntries(" + string(mustJSON(sortedKeys(vars))) +
			".map((k) => [k, process.env[k]]));\nObject.assign(process.env, " + string(mustJSON(vars)) + ")"
		restore := "for (const [k, v] of Object.entries(" + jsEnvSaved + " || {})) {\n" +
			"  if (v === undefined) delete process.env[k]; else process.env[k] = v\n}\n" +
			"delete " + jsEnvSaved
		return setup, restore
	},
}
