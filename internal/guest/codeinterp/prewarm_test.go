package codeinterp

import (
	"context"
	"testing"
)

// TestPrewarmJavaScript: the prewarm always starts Python's default
// context and registers JavaScript's (E2B lists both from the start); its
// kernel is started by the prewarm only with PrewarmJS, else by its
// first cell, in that same context.
func TestPrewarmJavaScript(t *testing.T) {
	for _, eager := range []bool{false, true} {
		ts := newTestServer(t, func(c *Config) { c.Prewarm, c.PrewarmJS = true, eager })
		ts.srv.prewarm(context.Background())
		byLang := map[string]*codeContext{}
		for _, c := range ts.srv.list() {
			byLang[c.Language] = c
		}
		py, js := byLang[langPython], byLang[langJavaScript]
		if py == nil || js == nil {
			t.Fatalf("eager=%v: contexts after the prewarm: %v", eager, ts.srv.list())
		}
		if py.kernel() == nil {
			t.Errorf("eager=%v: the Python kernel did not start", eager)
		}
		if started := js.kernel() != nil; started != eager {
			t.Errorf("eager=%v: JavaScript kernel started = %v", eager, started)
		}
		r := ts.exec(map[string]any{"code": "40 + 2", "language": "js"})
		if got := mustMain(t, r); got != "42" {
			t.Errorf("eager=%v: first JavaScript cell = %q", eager, got)
		}
		if len(ts.srv.list()) != 2 || js.kernel() == nil {
			t.Errorf("eager=%v: the cell did not run in the registered context: %v", eager, ts.srv.list())
		}
	}
}
