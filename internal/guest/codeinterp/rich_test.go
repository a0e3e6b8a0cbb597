package codeinterp

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

var pngHeader = []byte("\x89PNG\r\n\x1a\n")

func decodePNG(t *testing.T, v any) []byte {
	t.Helper()
	s, ok := v.(string)
	if !ok || s == "" {
		t.Fatalf("png field missing or not a string: %T", v)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("png is not base64: %v", err)
	}
	if !bytes.HasPrefix(b, pngHeader) {
		t.Fatalf("png has no PNG header: %q", b[:min(len(b), 16)])
	}
	return b
}

func TestMatplotlibFigures(t *testing.T) {
	requireLibs(t)
	ts := newTestServer(t)
	tests := []struct {
		name, code string
		wantMain   bool // the figure is the cell's value
		want       int  // figure results
	}{
		{"show", "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')\nplt.show()", false, 1},
		{"open at end", "plt.figure()\nplt.bar(['a', 'b'], [1, 2])\nprint('drawn')", false, 1},
		// As in every IPython frontend: the cell's value, and the inline
		// backend showing the figure pyplot created in the cell.
		{"figure value", "fig, ax = plt.subplots()\nax.plot([3, 1])\nfig", true, 2},
	}
	for _, tc := range tests {
		r := ts.run(tc.code)
		if e := r.err(); e != nil {
			t.Fatalf("%s: error %v", tc.name, e)
		}
		var pngs []map[string]any
		for _, e := range r.of("result") {
			if e.get("png") != nil {
				pngs = append(pngs, e.m)
			}
		}
		if len(pngs) != tc.want {
			t.Fatalf("%s: want %d figure results, got %d: %v", tc.name, tc.want, len(pngs), r.events)
		}
		decodePNG(t, pngs[0]["png"])
		if pngs[0]["is_main_result"] != tc.wantMain {
			t.Errorf("%s: is_main_result = %v, want %v", tc.name, pngs[0]["is_main_result"], tc.wantMain)
		}
		if !strings.HasPrefix(str(pngs[0]["text"]), "<Figure size") {
			t.Errorf("%s: figure text = %q", tc.name, pngs[0]["text"])
		}
		if strings.Contains(r.text("stderr"), "Warning") {
			t.Errorf("%s: warnings on stderr: %q", tc.name, r.text("stderr"))
		}
	}
	if n := len(ts.run("1").of("result")); n != 1 {
		t.Errorf("closed figures were shown again: %d results", n)
	}
}

func TestDataFrameResult(t *testing.T) {
	requireLibs(t)
	ts := newTestServer(t)
	r := ts.run("import pandas as pd, numpy as np\ndf = pd.DataFrame({'name': ['a', 'b'], 'v': [1.5, np.nan]})\ndf")
	m := r.main()
	if m == nil {
		t.Fatalf("no main result: %v", r.events)
	}
	if html := str(m["html"]); !strings.Contains(html, "<table") || !strings.Contains(html, "name") {
		t.Errorf("html = %q", html)
	}
	if text := str(m["text"]); !strings.Contains(text, "name") || !strings.Contains(text, "NaN") {
		t.Errorf("text = %q", text)
	}
	data, ok := m["data"].(map[string]any)
	if !ok {
		t.Fatalf("data = %#v", m["data"])
	}
	if v := data["v"].([]any); len(v) != 2 || v[0] != 1.5 || v[1] != nil {
		t.Errorf("data[v] = %v, want [1.5 nil]", v)
	}
	r = ts.run("df.plot()")
	var sawPNG bool
	for _, e := range r.of("result") {
		if e.get("png") != nil {
			decodePNG(t, e.get("png"))
			sawPNG = true
		}
	}
	if !sawPNG {
		t.Errorf("DataFrame.plot() produced no figure: %v", r.events)
	}
}

func TestDisplayAndReprMethods(t *testing.T) {
	ts := newTestServer(t)
	code := `class Rich:
    def __repr__(self): return 'Rich()'
    def _repr_html_(self): return '<b>rich</b>'
    def _repr_markdown_(self): return '**rich**'
    def _repr_json_(self): return {'k': 1}
display(Rich())
Rich()`
	r := ts.run(code)
	results := r.of("result")
	if len(results) != 2 {
		t.Fatalf("want display + main result, got %v", r.events)
	}
	for i, e := range results {
		if e.get("html") != "<b>rich</b>" || e.get("markdown") != "**rich**" || e.get("text") != "Rich()" {
			t.Errorf("result %d = %v", i, e.m)
		}
		if j, _ := e.get("json").(map[string]any); j["k"] != float64(1) {
			t.Errorf("result %d json = %v", i, e.get("json"))
		}
		if e.get("is_main_result") != (i == 1) {
			t.Errorf("result %d is_main_result = %v", i, e.get("is_main_result"))
		}
	}
}
