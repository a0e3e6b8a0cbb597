package server

import (
	"net/http"
	"strings"
	"testing"
)

// TestTemplateTagRoutes checks the tag routes' wiring and error classes
// (which build a tag names is tested in internal/template/build).
func TestTemplateTagRoutes(t *testing.T) {
	e := newTemplateEnv(t)
	if resp, body := e.call("POST", "/v3/templates", map[string]any{"name": "app:v1"}); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("request build: %d %s", resp.StatusCode, body)
	}
	for _, tc := range []struct {
		method, path string
		body         any
		want         int
		says         string
	}{
		{"GET", "/templates/app/tags", nil, 200, "[]"},
		{"GET", "/templates/nope/tags", nil, 404, "nope"},
		{"POST", "/templates/tags", map[string]any{"target": "app:v1", "tags": []string{"prod"}}, 404, "no ready build"},
		{"POST", "/templates/tags", map[string]any{"target": "nope:v1", "tags": []string{"prod"}}, 404, "nope"},
		{"POST", "/templates/tags", map[string]any{"target": "app", "tags": []string{"bad tag"}}, 400, "bad tag"},
		{"POST", "/templates/tags", map[string]any{"target": "app"}, 400, "no tags"},
		{"DELETE", "/templates/tags", map[string]any{"name": "app", "tags": []string{"v9"}}, 404, "v9"},
		{"DELETE", "/templates/tags", map[string]any{"name": "nope", "tags": []string{"v1"}}, 404, "nope"},
	} {
		resp, body := e.call(tc.method, tc.path, tc.body)
		if resp.StatusCode != tc.want || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s %s %v: %d %s, want %d saying %q", tc.method, tc.path, tc.body, resp.StatusCode, body, tc.want, tc.says)
		}
	}
}
