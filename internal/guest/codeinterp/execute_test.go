package codeinterp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestStatePersistsAcrossCalls(t *testing.T) {
	ts := newTestServer(t)
	steps := []struct {
		code string
		want string
	}{
		{"x = 20", ""},
		{"import math\ndef double(v):\n    return v * 2", ""},
		{"double(x) + 2", "42"},
		{"math.sqrt(16)", "4.0"},
		{"'a string'", "a string"},
		{"s = 'x'\ns * 3", "xxx"},
		{"[1, 2]", "[1, 2]"},
		{"x = 5\nx", "5"},
	}
	for i, s := range steps {
		r := ts.run(s.code)
		if s.want == "" {
			if r.main() != nil || r.err() != nil {
				t.Fatalf("step %d: want no result, got %v", i, r.events)
			}
			continue
		}
		if got := mustMain(t, r); got != s.want {
			t.Errorf("step %d: %q = %q, want %q", i, s.code, got, s.want)
		}
	}
}

func TestEventShapes(t *testing.T) {
	ts := newTestServer(t)
	r := ts.run("print('hi')\n1 + 1")
	types := []string{}
	for _, e := range r.events {
		types = append(types, e.typ())
	}
	want := "number_of_executions,stdout,result,end_of_execution"
	if got := strings.Join(types, ","); got != want {
		t.Fatalf("event types %s, want %s", got, want)
	}
	if n, ok := r.events[0].get("execution_count").(float64); !ok || n != 1 {
		t.Errorf("execution_count = %v, want 1", r.events[0].get("execution_count"))
	}
	if ts := str(r.events[1].get("timestamp")); ts == "" {
		t.Error("stdout event has no timestamp")
	}
	res := r.main()
	if res["text"] != "2" || res["is_main_result"] != true {
		t.Errorf("result = %v", res)
	}
	if n := ts.run("None").of("number_of_executions")[0].get("execution_count"); n != float64(2) {
		t.Errorf("second execution_count = %v, want 2", n)
	}
}

func TestStreamOrderAndTiming(t *testing.T) {
	ts := newTestServer(t)
	r := ts.run("import sys, os, time\nprint('a')\nprint('b', file=sys.stderr)\nprint('c')\nos.system('echo shell')")
	// ipykernel batches each stream's output for a moment before it sends
	// a stream message, so the order between the two streams is lost (in
	// every Jupyter frontend); within a stream it is kept, and output of a
	// subprocess (os.system writes to fd 1) is captured too.
	if got := r.text("stdout"); got != "a\nc\nshell\n" {
		t.Errorf("stdout %q, want %q", got, "a\nc\nshell\n")
	}
	if got := r.text("stderr"); got != "b\n" {
		t.Errorf("stderr %q, want %q", got, "b\n")
	}

	r = ts.run("print('first')\ntime.sleep(0.5)\nprint('second')")
	outs := r.of("stdout")
	if len(outs) != 2 {
		t.Fatalf("want 2 stdout events, got %v", r.events)
	}
	produced, err := time.Parse(time.RFC3339Nano, str(outs[1].get("timestamp")))
	if err != nil {
		t.Fatalf("bad timestamp: %v", err)
	}
	if !outs[0].at.Before(produced) {
		t.Errorf("first line arrived at %v, after the second was produced at %v: not streamed", outs[0].at, produced)
	}
	r = ts.run("import sys\nsys.stdout.write('partial')\ntime.sleep(0.5)\nprint(' done')")
	if outs := r.of("stdout"); len(outs) != 2 || str(outs[0].get("text")) != "partial" {
		t.Errorf("partial line was not flushed on its own: %v", r.events)
	}
}

func TestErrorsAndRecovery(t *testing.T) {
	ts := newTestServer(t)
	tests := []struct {
		code, name, value, inTraceback string
	}{
		{"1/0", "ZeroDivisionError", "division by zero", "1/0"},
		{"def f(:\n  pass", "SyntaxError", "", "SyntaxError"},
		{"undefined_name", "NameError", "name 'undefined_name' is not defined", "Cell In [4], line 2"},
		{"def g():\n    raise ValueError('boom')\ng()", "ValueError", "boom", "raise ValueError('boom')"},
		{"import sys\nsys.exit(3)", "SystemExit", "3", "SystemExit"},
	}
	ts.run("keep = 'still here'")
	for _, tc := range tests {
		r := ts.run("print('before')\n" + tc.code)
		e := r.err()
		if e == nil {
			t.Fatalf("%q: no error event in %v", tc.code, r.events)
		}
		if e["name"] != tc.name || (tc.value != "" && e["value"] != tc.value) {
			t.Errorf("%q: error %v/%v, want %s/%s", tc.code, e["name"], e["value"], tc.name, tc.value)
		}
		tb := str(e["traceback"])
		if !strings.Contains(tb, tc.inTraceback) || strings.Contains(tb, "worker.py") {
			t.Errorf("%q: traceback %q should show %q and no worker frames", tc.code, tb, tc.inTraceback)
		}
	}
	if got := mustMain(t, ts.run("keep")); got != "still here" {
		t.Errorf("state after errors = %q", got)
	}
}

func TestEnvVarsApplyToOneExecution(t *testing.T) {
	ts := newTestServer(t)
	ts.run("import os\nos.environ['KEEP'] = 'old'")
	r := ts.exec(map[string]any{
		"code":     "print(os.environ['KEEP'])\nos.environ.get('ONLY_NOW')",
		"env_vars": map[string]string{"KEEP": "new", "ONLY_NOW": "yes"},
	})
	if got := mustMain(t, r); got != "yes" || r.text("stdout") != "new\n" {
		t.Errorf("with env_vars: result %q stdout %q", got, r.text("stdout"))
	}
	if got := mustMain(t, ts.run("(os.environ.get('KEEP'), os.environ.get('ONLY_NOW'))")); got != "('old', None)" {
		t.Errorf("after: %s, want ('old', None)", got)
	}
	r = ts.exec(map[string]any{"code": "import subprocess\nsubprocess.run(['sh', '-c', 'echo $ONLY_NOW'])", "env_vars": map[string]string{"ONLY_NOW": "child"}})
	if r.text("stdout") != "child\n" {
		t.Errorf("subprocess did not see env var: %q", r.text("stdout"))
	}
}

func TestEnvdEnvironmentIsApplied(t *testing.T) {
	envd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/envs" || r.Header.Get("X-Access-Token") != "tok" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"FROM_ENVD":"yes"}`))
	}))
	defer envd.Close()
	ts := newTestServer(t, func(c *Config) { c.EnvdURL = envd.URL })
	ts.token = "tok"
	for _, lang := range []string{"python", "bash"} {
		code := "import os\nos.environ.get('FROM_ENVD')"
		if lang == "bash" {
			code = "echo $FROM_ENVD"
		}
		r := ts.run(code, ts.newContext(lang, ""))
		if !strings.Contains(r.text("stdout")+str(r.main()["text"]), "yes") {
			t.Errorf("%s: envd variable missing: %v", lang, r.events)
		}
	}
}

func TestInterruptByClosingRequest(t *testing.T) {
	ts := newTestServer(t)
	tests := []struct{ lang, setup, cell, check, want string }{
		{"python", "kept = 7", "import time\nprint('started', flush=True)\ntime.sleep(60)", "kept", "7"},
		{"python", "kept = 8", "print('started', flush=True)\nwhile True:\n    pass", "kept", "8"},
		{"bash", "cd /tmp && KEPT=9", "echo started; sleep 60", "echo $KEPT $(pwd)", "9 /tmp\n"},
	}
	for _, tc := range tests {
		id := ts.newContext(tc.lang, "")
		ts.run(tc.setup, id)
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		ts.stream(ctx, map[string]any{"code": tc.cell, "context_id": id}, func(e event) bool {
			return e.typ() != "stdout" // close the request once the cell runs
		})
		cancel()
		r := ts.run(tc.check, id)
		got := r.text("stdout")
		if tc.lang == "python" {
			got = mustMain(t, r)
		}
		if got != tc.want {
			t.Errorf("%s: after interrupt %q = %q, want %q (%v)", tc.lang, tc.check, got, tc.want, r.events)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: interrupt took %v; the cell was not interrupted promptly", tc.lang, d)
		}
	}
}

func TestCellIgnoringInterruptsIsKilled(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.InterruptGrace = time.Second })
	id := ts.newContext("python", "")
	ts.run("lost = 1", id)
	ctx, cancel := context.WithCancel(context.Background())
	// The cell ignores SIGINT outright: catching KeyboardInterrupt inside
	// the loop is racy (an interrupt landing between two statements of the
	// loop escapes the try and ends the cell normally).
	code := "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('go', flush=True)\nwhile True:\n    time.sleep(0.05)"
	ts.stream(ctx, map[string]any{"code": code, "context_id": id}, func(e event) bool { return e.typ() != "stdout" })
	cancel()
	r := ts.run("'lost' in globals()", id)
	if got := mustMain(t, r); got != "False" {
		t.Errorf("after kill: %s, want a fresh context", got)
	}
}
