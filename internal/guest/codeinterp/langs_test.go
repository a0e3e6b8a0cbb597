package codeinterp

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// langCase is one cell of a language test and what it must give.
type langCase struct {
	code                 string
	env                  map[string]string
	main, stdout, errSub string // errSub: the error's name or value contains it
	// display is the text of the cell's one result when it is not the main
	// one (IRkernel shows values as display_data, so E2B's R results are).
	display string
}

// runLangCases runs cases in order in lang's default context.
func runLangCases(t *testing.T, ts *testServer, lang string, cases []langCase) {
	t.Helper()
	for i, c := range cases {
		r := ts.exec(map[string]any{"code": c.code, "language": lang, "env_vars": c.env})
		if c.main != "" {
			if m := r.main(); m == nil || str(m["text"]) != c.main {
				t.Errorf("%s cell %d %q: main result %v, want %q (%v)", lang, i, c.code, m, c.main, r.events)
			}
		}
		if res := r.of("result"); c.display != "" && (len(res) != 1 || str(res[0].get("text")) != c.display) {
			t.Errorf("%s cell %d %q: results %v, want one with text %q", lang, i, c.code, res, c.display)
		}
		if c.stdout != "" && r.text("stdout") != c.stdout {
			t.Errorf("%s cell %d %q: stdout %q, want %q", lang, i, c.code, r.text("stdout"), c.stdout)
		}
		e := r.err()
		switch {
		case c.errSub == "" && e != nil:
			t.Errorf("%s cell %d %q: unexpected error %v", lang, i, c.code, e)
		case c.errSub != "" && (e == nil || !strings.Contains(str(e["name"])+": "+str(e["value"]), c.errSub)):
			t.Errorf("%s cell %d %q: error %v, want one with %q", lang, i, c.code, e, c.errSub)
		}
	}
}

// TestRKernel runs cells in Debian's IRkernel.
func TestRKernel(t *testing.T) {
	ts := newTestServer(t)
	runLangCases(t, ts, "r", []langCase{
		{code: "x <- 20\ncat('hi\\n')\nx * 2 + 2", display: "[1] 42", stdout: "hi\n"},
		{code: "x + 1", display: "[1] 21"},
		{code: "Sys.getenv('FB_R')", env: map[string]string{"FB_R": "set"}, display: `[1] "set"`},
		{code: "Sys.getenv('FB_R', unset = 'gone')", display: `[1] "gone"`},
		{code: "stop('bad thing')", errSub: "bad thing"},
		{code: "basename(getwd())", display: `[1] "` + filepath.Base(ts.srv.defaultWorkDir()) + `"`},
		// IRkernel's quit() (base::quit too) only asks the frontend to
		// stop it (an ask_exit payload, which E2B's server ignores as
		// forkbox does); R's primitive exits.
		{code: "quit(save = 'no')"},
		{code: "x", display: "[1] 20"},
		{code: ".Internal(quit('no', 3L, FALSE))", errSub: "DeadKernelError"},
		{code: "exists('x')", display: "[1] FALSE"},
	})
	r := ts.exec(map[string]any{"code": "1", "language": "r"})
	r2 := ts.exec(map[string]any{"code": "2", "language": "r"})
	n1, n2 := r.of("number_of_executions")[0].get("execution_count"), r2.of("number_of_executions")[0].get("execution_count")
	if n2 != n1.(float64)+1 {
		t.Errorf("execution counts %v then %v", n1, n2)
	}
}

// TestJavaKernel runs cells in the jshell-based Java kernel.
func TestJavaKernel(t *testing.T) {
	ts := newTestServer(t)
	runLangCases(t, ts, "java", []langCase{
		{code: "import java.util.*;\nint x = 20;\nSystem.out.println(\"hi\");\nx * 2 + 2", main: "42", stdout: "hi\n"},
		{code: "List<Integer> l = new ArrayList<>(List.of(x, x + 1));\nl.get(1)", main: "21"},
		{code: "String s = \"a\\\"b\";\ns", main: `a"b`},
		{code: "System.getenv(\"FB_JAVA\")", env: map[string]string{"FB_JAVA": "set"}, main: "set"},
		{code: "String.valueOf(System.getenv(\"FB_JAVA\"))", main: "null"},
		{code: "int y = 1 / 0;", errSub: "java.lang.ArithmeticException: / by zero"},
		{code: "undefinedThing + 1", errSub: "CompilationException"},
		{code: "x", main: "20"},
		{code: "new java.io.File(\"\").getAbsolutePath()", main: ts.srv.defaultWorkDir()},
		{code: "System.exit(3);", errSub: "DeadKernelError"},
		{code: "1 + 1", main: "2"},
	})
}

// An interrupted R or Java cell stops and the kernel keeps its state.
func TestInterruptKeepsState(t *testing.T) {
	ts := newTestServer(t)
	tests := []struct{ lang, setup, loop, check, want string }{
		{"java", "int keep = 7;", "System.out.println(\"go\");\nwhile (true) {}", "keep", "7"},
		{"r", "keep <- 7", "cat('go\\n')\nwhile (TRUE) {}", "keep", "[1] 7"},
	}
	for _, tc := range tests {
		ts.exec(map[string]any{"code": tc.setup, "language": tc.lang})
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		ts.stream(ctx, map[string]any{"code": tc.loop, "language": tc.lang}, func(e event) bool { return e.typ() != "stdout" })
		cancel()
		r := ts.exec(map[string]any{"code": tc.check, "language": tc.lang})
		if res := r.of("result"); len(res) != 1 || str(res[0].get("text")) != tc.want {
			t.Errorf("%s: after the interrupt %s gives %v, want %q", tc.lang, tc.check, r.events, tc.want)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: interrupt took %v", tc.lang, d)
		}
	}
}
