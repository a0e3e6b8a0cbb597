package codeinterp

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// These tests run Debian's real ipykernel (python3-ipykernel) behind the
// server and check the mapping of its Jupyter messages to E2B's events.

func TestIPythonSyntax(t *testing.T) {
	ts := newTestServer(t)
	dir := t.TempDir()
	tests := []struct {
		name, code string
		check      func(r execResult) string // "" when fine
	}{
		{"shell escape", "import os\nos.chdir(" + pyQuote(dir) + ")\n!pwd", func(r execResult) string {
			if got := r.text("stdout"); strings.TrimSpace(got) != dir {
				return "stdout " + got
			}
			return ""
		}},
		{"line magic", "%timeit -n1 -r1 sum(range(10))", func(r execResult) string {
			if !strings.Contains(r.text("stdout"), "per loop") {
				return "stdout " + r.text("stdout")
			}
			return ""
		}},
		{"cell magic", "%%bash\necho from-bash $((1+2))", func(r execResult) string {
			if got := r.text("stdout"); got != "from-bash 3\n" {
				return "stdout " + got
			}
			return ""
		}},
		{"top-level await", "import asyncio\nawait asyncio.sleep(0)\n'awaited'", func(r execResult) string {
			if m := r.main(); m == nil || m["text"] != "awaited" {
				return "no main result 'awaited'"
			}
			return ""
		}},
	}
	for _, tc := range tests {
		r := ts.run(tc.code)
		if e := r.err(); e != nil {
			t.Errorf("%s: error %v", tc.name, e)
			continue
		}
		if msg := tc.check(r); msg != "" {
			t.Errorf("%s: %s (events %v)", tc.name, msg, r.events)
		}
	}
}

func pyQuote(s string) string { return string(mustJSON(s)) }

// Execution counts are IPython's: the first cell is 1, a failed cell
// counts, and the server's own bookkeeping (env vars) does not.
func TestExecutionCountsAreIPythons(t *testing.T) {
	ts := newTestServer(t)
	count := func(r execResult) any {
		if ev := r.of("number_of_executions"); len(ev) == 1 {
			return ev[0].get("execution_count")
		}
		return nil
	}
	if n := count(ts.run("1")); n != float64(1) {
		t.Errorf("first count %v, want 1", n)
	}
	if n := count(ts.run("1/0")); n != float64(2) {
		t.Errorf("failing cell count %v, want 2", n)
	}
	r := ts.exec(map[string]any{"code": "import os\nos.environ['X']", "env_vars": map[string]string{"X": "y"}})
	if n := count(r); n != float64(3) {
		t.Errorf("count with env_vars %v, want 3", n)
	}
	if got := mustMain(t, ts.run("In[1], Out[1], _3")); got != "('1', 1, 'y')" {
		t.Errorf("IPython history = %s", got)
	}
}

func TestDisplayInLoopAndMIMETypes(t *testing.T) {
	ts := newTestServer(t)
	r := ts.run("from IPython.display import display, HTML, Markdown, Latex, JSON, Javascript, SVG\n" +
		"for i in range(3):\n    display(i)\n" +
		"display(HTML('<b>h</b>'), Markdown('*m*'), Latex('$x$'), JSON({'a': 1}), Javascript('1'))\n" +
		"display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\"/>'))\n" +
		"display({'text/plain': 'p', 'application/x-custom': 'c'}, raw=True)\n" +
		"'last'")
	res := r.of("result")
	if len(res) != 11 {
		t.Fatalf("want 11 results, got %d: %v", len(res), r.events)
	}
	for i := range 3 {
		if res[i].get("text") != string(rune('0'+i)) || res[i].get("is_main_result") != false {
			t.Errorf("display(%d) = %v", i, res[i].m)
		}
	}
	want := []struct{ field, contains string }{
		{"html", "<b>h</b>"}, {"markdown", "*m*"}, {"latex", "$x$"}, {"json", ""}, {"javascript", "1"}, {"svg", "<svg"},
	}
	for i, w := range want {
		v := res[3+i].get(w.field)
		if v == nil || (w.contains != "" && !strings.Contains(str(v), w.contains)) {
			t.Errorf("result %d: %s = %v in %v", 3+i, w.field, v, res[3+i].m)
		}
	}
	if j, _ := res[6].get("json").(map[string]any); j["a"] != float64(1) {
		t.Errorf("json = %v", res[6].get("json"))
	}
	if extra, _ := res[9].get("extra").(map[string]any); extra["application/x-custom"] != "c" {
		t.Errorf("unknown MIME type not in extra: %v", res[9].m)
	}
	if m := r.main(); m == nil || m["text"] != "last" || res[10].get("is_main_result") != true {
		t.Errorf("main result %v", r.main())
	}
}

func TestPILImagesArePNG(t *testing.T) {
	requireLibs(t)
	ts := newTestServer(t)
	ts.run("from PIL import Image\nimg = Image.new('RGB', (8, 8), 'red')")
	path := t.TempDir() + "/x.png"
	for _, code := range []string{"img", "display(img)", "img.show()", "img.save(" + pyQuote(path) + ")"} {
		r := ts.run(code)
		if e := r.err(); e != nil {
			t.Fatalf("%s: %v", code, e)
		}
		res := r.of("result")
		if len(res) != 1 {
			t.Fatalf("%s: want one result, got %v", code, r.events)
		}
		decodePNG(t, res[0].get("png"))
		if (code == "img") != (res[0].get("is_main_result") == true) {
			t.Errorf("%s: is_main_result %v", code, res[0].get("is_main_result"))
		}
	}
}

// Code that kills its kernel gets an error event, and the next execution
// runs in a fresh kernel of the same context.
func TestKernelDeathAndRecovery(t *testing.T) {
	ts := newTestServer(t)
	ts.run("x = 1")
	r := ts.run("import os\nos._exit(1)")
	if e := r.err(); e == nil || e["name"] != "DeadKernelError" {
		t.Fatalf("want DeadKernelError, got %v", r.events)
	}
	r = ts.run("'x' in dir()")
	if got := mustMain(t, r); got != "False" {
		t.Errorf("state after the kernel died: 'x' in dir() = %s", got)
	}
	if n := r.of("number_of_executions")[0].get("execution_count"); n != float64(1) {
		t.Errorf("fresh kernel count %v, want 1", n)
	}
}

// A restart while a cell runs ends that cell with ContextRestarting.
func TestRestartDuringExecution(t *testing.T) {
	ts := newTestServer(t)
	id := ts.newContext("python", "")
	ts.run("y = 5", id)
	done := make(chan execResult)
	go func() { done <- ts.run("import time\nprint('started', flush=True)\ntime.sleep(60)", id) }()
	time.Sleep(1500 * time.Millisecond)
	if code := ts.call(http.MethodPost, "/contexts/"+id+"/restart", nil, nil); code != http.StatusOK {
		t.Fatalf("restart: %d", code)
	}
	select {
	case r := <-done:
		if e := r.err(); e == nil || e["name"] != "ContextRestarting" {
			t.Errorf("want ContextRestarting, got %v", r.events)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the running cell did not end after the restart")
	}
	if got := mustMain(t, ts.run("'y' in dir()", id)); got != "False" {
		t.Errorf("state survived the restart")
	}
}

// A flood of output is cut at the limit; the cell still ends normally.
func TestOutputFloodIsBounded(t *testing.T) {
	old := maxStreamBytes
	maxStreamBytes = 1 << 20
	t.Cleanup(func() { maxStreamBytes = old })
	ts := newTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var res execResult
	ts.stream(ctx, map[string]any{"code": "for i in range(200000):\n    print('x' * 99)\n'end'"}, func(e event) bool {
		res.events = append(res.events, e)
		return true
	})
	out := res.text("stdout")
	if len(out) > maxStreamBytes || len(out) < maxStreamBytes/2 {
		t.Errorf("stdout bytes %d, want about %d", len(out), maxStreamBytes)
	}
	if !strings.Contains(res.text("stderr"), "output truncated") {
		t.Error("no truncation notice")
	}
	if m := res.main(); m == nil || m["text"] != "end" {
		t.Error("main result lost after the flood")
	}
	if n := len(res.events); n == 0 || res.events[n-1].typ() != "end_of_execution" {
		t.Error("no end_of_execution after the flood")
	}
}

func TestStripANSI(t *testing.T) {
	tests := map[string]string{
		"plain":                       "plain",
		"\x1b[0;31mValueError\x1b[0m": "ValueError",
		"a\x1b[1;32m-->\x1b[39m b":    "a--> b",
	}
	for in, want := range tests {
		if got := stripANSI(in); got != want {
			t.Errorf("stripANSI(%q) = %q, want %q", in, got, want)
		}
	}
}
