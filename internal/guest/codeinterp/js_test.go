package codeinterp

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestJavaScriptKernel runs cells in npm's ijavascript kernel.
func TestJavaScriptKernel(t *testing.T) {
	ts := newTestServer(t)
	run := func(code string, env map[string]string) execResult {
		return ts.exec(map[string]any{"code": code, "language": "js", "env_vars": env})
	}
	r := run("let x = 20\nconsole.log('hi')\nx * 2 + 2", nil)
	if got := mustMain(t, r); got != "42" || r.text("stdout") != "hi\n" {
		t.Errorf("first cell: result %q stdout %q", got, r.text("stdout"))
	}
	n1 := r.of("number_of_executions")[0].get("execution_count")
	if got := mustMain(t, run("x + 1", nil)); got != "21" {
		t.Errorf("state across calls: x + 1 = %q", got)
	}
	r = run("process.env.FB_JS", map[string]string{"FB_JS": "set"})
	if got := mustMain(t, r); got != "set" {
		t.Errorf("env var: %q", got)
	}
	if got := mustMain(t, run("String(process.env.FB_JS)", nil)); got != "undefined" {
		t.Errorf("env var after the cell: %q", got)
	}
	r = run("throw new TypeError('bad')", nil)
	if e := r.err(); e == nil || e["name"] != "TypeError" || e["value"] != "bad" || !strings.Contains(str(e["traceback"]), "TypeError") {
		t.Errorf("error event %v", r.events)
	}
	r = run("process.cwd()", nil)
	if n := r.of("number_of_executions")[0].get("execution_count"); n != n1.(float64)+5 {
		t.Errorf("execution count %v after %v and four cells", n, n1)
	}
}

// An interrupted JavaScript or TypeScript cell stops, whether it loops or
// waits, and the kernel keeps its state (ijavascript alone restarts its
// session on SIGINT).
func TestJavaScriptInterruptKeepsState(t *testing.T) {
	ts := newTestServer(t)
	cells := []string{
		"console.log('go')\nwhile (true) {}",
		"console.log('go')\nawait new Promise(() => {})",
		"console.log('go')\nrequire('child_process').execSync('sleep 60')",
	}
	for _, lang := range []string{"js", "ts"} {
		ts.exec(map[string]any{"code": "var keep = 7", "language": lang})
		for _, cell := range cells {
			start := time.Now()
			ctx, cancel := context.WithCancel(context.Background())
			ts.stream(ctx, map[string]any{"code": cell, "language": lang}, func(e event) bool { return e.typ() != "stdout" })
			cancel()
			r := ts.exec(map[string]any{"code": "keep += 1\nkeep", "language": lang})
			if e := r.err(); e != nil || r.main() == nil {
				t.Fatalf("%s %q: after the interrupt: %v", lang, cell, r.events)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("%s %q: interrupt and the next cell took %v", lang, cell, d)
			}
		}
		if got := mustMain(t, ts.exec(map[string]any{"code": "keep", "language": lang})); got != "10" {
			t.Errorf("%s: keep = %s after three interrupted cells, want 10", lang, got)
		}
	}
}

// A JavaScript cell that ends its session process (process.exit, or the
// out-of-memory guard's kill) gets DeadKernelError at once, and the next
// call a fresh kernel (ijavascript alone leaves the cell unanswered).
func TestJavaScriptSessionDeath(t *testing.T) {
	ts := newTestServer(t)
	for _, lang := range []string{"js", "ts"} {
		ts.exec(map[string]any{"code": "var keep = 7", "language": lang})
		start := time.Now()
		r := ts.exec(map[string]any{"code": "process.kill(process.pid, 'SIGKILL')", "language": lang})
		if e := r.err(); e == nil || e["name"] != "DeadKernelError" || !strings.Contains(str(e["value"]), "SIGKILL") {
			t.Errorf("%s: a killed session gave %v, want DeadKernelError naming SIGKILL", lang, r.events)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: the dead session was noticed after %v", lang, d)
		}
		r = ts.exec(map[string]any{"code": "require('fs').writeSync(2, 'last words\\n')\nprocess.kill(process.pid, 'SIGKILL')", "language": lang})
		if e := r.err(); e == nil || !strings.Contains(str(e["value"]), "SIGKILL: last words") {
			t.Errorf("%s: the session's last words are not in %v", lang, r.events)
		}
		// As V8 dies of a full heap: its fatal line, then a native stack.
		r = ts.exec(map[string]any{"code": "require('fs').writeSync(2, 'FATAL ERROR: heap full\\n 1: frame\\n 2: frame\\n 3: frame\\n 4: frame\\n')\nprocess.abort()", "language": lang})
		if e := r.err(); e == nil || !strings.HasSuffix(str(e["value"]), "SIGABRT: FATAL ERROR: heap full") {
			t.Errorf("%s: V8's fatal line is not the death message's end: %v", lang, r.events)
		}
		r = ts.exec(map[string]any{"code": "process.exit(3)", "language": lang})
		if e := r.err(); e == nil || e["name"] != "DeadKernelError" || !strings.Contains(str(e["value"]), "status 3") {
			t.Errorf("%s: process.exit(3) gave %v", lang, r.events)
		}
		if got := mustMain(t, ts.exec(map[string]any{"code": "typeof keep", "language": lang})); got != "undefined" {
			t.Errorf("%s: after the kernel died typeof keep = %q, want a fresh kernel", lang, got)
		}
	}
}

// TypeScript cells are transpiled and run in their own JavaScript kernel.
func TestTypeScript(t *testing.T) {
	ts := newTestServer(t)
	run := func(code string) execResult { return ts.exec(map[string]any{"code": code, "language": "ts"}) }
	if got := mustMain(t, run("interface P { n: number }\nconst p: P = { n: 20 }\nfunction twice(x: number): number { return x * 2 }\ntwice(p.n) + 2")); got != "42" {
		t.Errorf("first cell = %q", got)
	}
	if got := mustMain(t, run("import * as path from 'path'\npath.join('a', String(p.n))")); got != "a/20" {
		t.Errorf("state and imports = %q", got)
	}
	if e := run("const broken: = 1").err(); e == nil || e["name"] != "SyntaxError" {
		t.Errorf("syntax error: %v", e)
	}
	if got := mustMain(t, ts.exec(map[string]any{"code": "typeof p", "language": "js"})); got != "undefined" {
		t.Errorf("the JavaScript context shares TypeScript's state: typeof p = %q", got)
	}
}

// Top-level await works in JavaScript and TypeScript cells; declarations
// made next to it persist and the last expression is the cell's value.
func TestTopLevelAwait(t *testing.T) {
	ts := newTestServer(t)
	for _, lang := range []string{"js", "ts"} {
		run := func(code string) execResult { return ts.exec(map[string]any{"code": code, "language": lang}) }
		decl := "const { a, b: [c] } = await Promise.resolve({ a: 20, b: [1] })\nfunction twice(x) { return x * 2 }\nclass K { v() { return 2 } }\n"
		if lang == "ts" {
			decl = "const { a, b: [c] }: { a: number, b: number[] } = await Promise.resolve({ a: 20, b: [1] })\nfunction twice(x: number): number { return x * 2 }\nclass K { v(): number { return 2 } }\n"
		}
		if got := mustMain(t, run(decl+"let d = await new Promise((r) => setTimeout(() => r(c), 10))\ntwice(a) + d + new K().v() - 1")); got != "42" {
			t.Errorf("%s: first cell = %q", lang, got)
		}
		if got := mustMain(t, run("a + c + d + twice(1)")); got != "24" {
			t.Errorf("%s: declarations after the await cell: %q", lang, got)
		}
		if got := mustMain(t, run("await Promise.resolve('s')")); got != "s" {
			t.Errorf("%s: awaited string = %q", lang, got)
		}
		if e := run("await Promise.reject(new RangeError('no'))").err(); e == nil || e["name"] != "RangeError" || e["value"] != "no" {
			t.Errorf("%s: rejected await: %v", lang, e)
		}
		if r := run("for (const x of [1]) { await null }\nconsole.log('loop')"); r.text("stdout") != "loop\n" || r.err() != nil {
			t.Errorf("%s: await in a loop: %v", lang, r.events)
		}
	}
}
