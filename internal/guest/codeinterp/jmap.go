package codeinterp

import (
	"encoding/json"
	"regexp"
	"strings"
)

// resultMIME maps the MIME types of a Jupyter display bundle to the fields
// of E2B's result event (template/server/api/models/result.py of
// e2b-dev/code-interpreter). Keys not listed go to "extra".
var resultMIME = map[string]string{
	"text/plain":             "text",
	"text/html":              "html",
	"text/markdown":          "markdown",
	"image/svg+xml":          "svg",
	"image/png":              "png",
	"image/jpeg":             "jpeg",
	"application/pdf":        "pdf",
	"text/latex":             "latex",
	"application/json":       "json",
	"application/javascript": "javascript",
	"e2b/data":               "data",
	"e2b/chart":              "chart",
}

// resultEvent converts a display bundle to E2B's result event. As in
// E2B, text that is a quoted string repr loses its quotes, and the
// execute result alone is the main result.
func resultEvent(data map[string]json.RawMessage, main bool) []byte {
	ev := map[string]any{"type": "result", "is_main_result": main}
	extra := map[string]json.RawMessage{}
	for mime, raw := range data {
		field, ok := resultMIME[mime]
		if !ok {
			extra[mime] = raw
			continue
		}
		if field == "text" {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				ev[field] = unquote(s)
				continue
			}
		}
		ev[field] = raw
	}
	ev["extra"] = extra
	return mustJSON(ev)
}

// unquote drops the quotes of a string's repr ('a' or "a").
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '\'' && s[len(s)-1] == '\'' || s[0] == '"' && s[len(s)-1] == '"') {
		return s[1 : len(s)-1]
	}
	return s
}

// ansi matches terminal escape sequences (colours, cursor movement).
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]`)

// stripANSI removes colour codes some kernels put in tracebacks.
func stripANSI(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	return ansi.ReplaceAllString(s, "")
}
