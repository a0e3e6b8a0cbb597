package codeinterp

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

type ctxInfo struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

func (ts *testServer) listContexts() []ctxInfo {
	ts.t.Helper()
	var out []ctxInfo
	if code := ts.call(http.MethodGet, "/contexts", nil, &out); code != http.StatusOK {
		ts.t.Fatalf("GET /contexts: %d", code)
	}
	return out
}

func hasContext(list []ctxInfo, id string) bool {
	return slices.ContainsFunc(list, func(c ctxInfo) bool { return c.ID == id })
}

func TestContextLifecycle(t *testing.T) {
	ts := newTestServer(t)
	dir := t.TempDir()
	var created ctxInfo
	if code := ts.call(http.MethodPost, "/contexts", map[string]string{"cwd": dir}, &created); code != http.StatusOK {
		t.Fatalf("POST /contexts: %d", code)
	}
	if created.Language != "python" || created.Cwd != dir || len(created.ID) != 36 {
		t.Fatalf("created context = %+v", created)
	}
	if got := mustMain(t, ts.run("import os\nos.getcwd()", created.ID)); got != dir {
		t.Errorf("cwd = %q, want %q", got, dir)
	}
	if !hasContext(ts.listContexts(), created.ID) {
		t.Fatalf("new context missing from list")
	}

	ts.run("state = 1", created.ID)
	if code := ts.call(http.MethodPost, "/contexts/"+created.ID+"/restart", nil, nil); code != http.StatusOK {
		t.Fatalf("restart: %d", code)
	}
	r := ts.run("state", created.ID)
	if e := r.err(); e == nil || e["name"] != "NameError" {
		t.Errorf("state survived a restart: %v", r.events)
	}
	if n := r.of("number_of_executions")[0].get("execution_count"); n != float64(1) {
		t.Errorf("execution_count after restart = %v, want 1", n)
	}
	if got := mustMain(t, ts.run("import os\nos.getcwd()", created.ID)); got != dir {
		t.Errorf("cwd after restart = %q, want %q", got, dir)
	}

	if code := ts.call(http.MethodDelete, "/contexts/"+created.ID, nil, nil); code != http.StatusOK {
		t.Fatalf("delete: %d", code)
	}
	if hasContext(ts.listContexts(), created.ID) {
		t.Errorf("deleted context still listed")
	}
	resp := ts.do(t.Context(), http.MethodPost, "/execute", map[string]any{"code": "1", "context_id": created.ID})
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("execute in deleted context: %d, want 404", resp.StatusCode)
	}
}

func TestContextErrors(t *testing.T) {
	ts := newTestServer(t)
	tests := []struct {
		method, path string
		body         any
		want         int
	}{
		{http.MethodPost, "/contexts/nope/restart", nil, http.StatusNotFound},
		{http.MethodDelete, "/contexts/nope", nil, http.StatusNotFound},
		{http.MethodPost, "/contexts", map[string]string{"language": "cobol"}, http.StatusBadRequest},
		{http.MethodPost, "/contexts", map[string]string{"cwd": "/does/not/exist"}, http.StatusBadRequest},
		{http.MethodPost, "/execute", map[string]any{"code": "1", "context_id": "nope"}, http.StatusNotFound},
		{http.MethodPost, "/execute", map[string]any{"code": "1", "context_id": "x", "language": "python"}, http.StatusBadRequest},
		{http.MethodPost, "/execute", map[string]any{"code": "1", "language": "cobol"}, http.StatusBadRequest},
		{http.MethodGet, "/health", nil, http.StatusOK},
	}
	for _, tc := range tests {
		if got := ts.call(tc.method, tc.path, tc.body, nil); got != tc.want {
			t.Errorf("%s %s %v: %d, want %d", tc.method, tc.path, tc.body, got, tc.want)
		}
	}
	// E2B's server answers 500 here; forkbox says what it supports.
	resp := ts.do(context.Background(), http.MethodPost, "/execute", map[string]any{"code": "1", "language": "cobol"})
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "supported: python, javascript (js), typescript (ts), r, java, bash") {
		t.Errorf("unknown language body %q lacks the supported list", b)
	}
}

func TestContextsAreIsolated(t *testing.T) {
	ts := newTestServer(t)
	a, b := ts.newContext("python", ""), ts.newContext("python", "")
	ts.run("shared = 'a'", a)
	ts.run("shared = 'b'", b)
	ts.run("shared = 'default'")
	for id, want := range map[string]string{a: "a", b: "b", "": "default"} {
		var r execResult
		if id == "" {
			r = ts.exec(map[string]any{"code": "shared", "language": "python"})
		} else {
			r = ts.run("shared", id)
		}
		if got := mustMain(t, r); got != want {
			t.Errorf("context %q: shared = %q, want %q", id, got, want)
		}
	}
	if len(ts.listContexts()) != 3 {
		t.Errorf("want 3 contexts (2 created + default), got %v", ts.listContexts())
	}
}

func TestBash(t *testing.T) {
	ts := newTestServer(t)
	id := ts.newContext("bash", "")
	steps := []struct {
		code, stdout, stderr, errValue string
		env                            map[string]string
	}{
		// stderr arrives merged into stdout, in order, as from E2B's
		// bash_kernel (both run bash on a pty).
		{code: "cd /tmp; X=5; f() { echo \"f:$1\"; }; echo hi; echo err >&2; echo end", stdout: "hi\nerr\nend\n"},
		{code: "if true; then\n\techo 'multi\n  line'\nfi", stdout: "multi\n  line\n"},
		{code: "echo 'unclosed", stdout: "bash: unexpected EOF while looking for matching `''\n", errValue: "2"},
		{code: "pwd; echo $X; f arg", stdout: "/tmp\n5\nf:arg\n"},
		{code: "printf 'no newline'", stdout: "no newline"},
		{code: "echo $ONCE", stdout: "yes\n", env: map[string]string{"ONCE": "yes"}},
		{code: "echo unreached", env: map[string]string{"BAD-NAME": "x"}, errValue: "1"},
		{code: "echo \"[$ONCE]\"", stdout: "[]\n"},
		{code: "echo before; false", stdout: "before\n", errValue: "1"},
		{code: "cat; echo read-stdin-ok", stdout: "read-stdin-ok\n"},
		{code: "exit 3", errValue: "DeadKernelError"},
		{code: "echo restarted", stdout: "restarted\n"},
	}
	for i, s := range steps {
		r := ts.exec(map[string]any{"code": s.code, "context_id": id, "env_vars": s.env})
		if got := r.text("stdout"); got != s.stdout {
			t.Errorf("step %d %q: stdout %q, want %q", i, s.code, got, s.stdout)
		}
		if got := r.text("stderr"); got != s.stderr {
			t.Errorf("step %d %q: stderr %q, want %q", i, s.code, got, s.stderr)
		}
		e := r.err()
		switch {
		case s.errValue == "" && e != nil:
			t.Errorf("step %d %q: unexpected error %v", i, s.code, e)
		case s.errValue != "" && (e == nil || (e["value"] != s.errValue && e["name"] != s.errValue)):
			t.Errorf("step %d %q: error %v, want %s", i, s.code, e, s.errValue)
		}
	}
	r := ts.exec(map[string]any{"code": "echo via-language", "language": "bash"})
	if r.text("stdout") != "via-language\n" {
		t.Errorf("language=bash: %v", r.events)
	}
}

func TestLanguageSelectsDefaultContext(t *testing.T) {
	ts := newTestServer(t)
	ts.run("marker = 'default'")
	r := ts.exec(map[string]any{"code": "marker", "language": "Python"})
	if got := mustMain(t, r); got != "default" {
		t.Errorf("language=python did not reuse the default context: %q", got)
	}
	list := ts.listContexts()
	if len(list) != 1 || !strings.EqualFold(list[0].Language, "python") {
		t.Errorf("contexts = %+v, want the one default python context", list)
	}
}
