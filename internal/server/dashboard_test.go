package server

import (
	"net/http"
	"strings"
	"testing"
)

// The dashboard's files are served without an API key (the page asks for
// one and sends it with its API calls); the API itself still needs it.
func TestDashboardRoutes(t *testing.T) {
	e := newEnv(t)
	noRedirect := *e.srv.Client()
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, tc := range []struct {
		path     string
		status   int
		contains string
	}{
		{"/", http.StatusFound, ""},
		{"/dashboard", http.StatusFound, ""},
		{"/dashboard/", http.StatusOK, "<html"},
		{"/dashboard/app.js", http.StatusOK, "lineage"},
		{"/dashboard/network.js", http.StatusOK, "forkbox:select"},
		{"/dashboard/nope.js", http.StatusNotFound, ""},
		{"/v2/sandboxes", http.StatusUnauthorized, ""},
	} {
		resp, err := noRedirect.Get(e.srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, 1<<16)
		n, _ := resp.Body.Read(body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: %d, want %d", tc.path, resp.StatusCode, tc.status)
		}
		if tc.contains != "" && !strings.Contains(strings.ToLower(string(body[:n])), tc.contains) {
			t.Errorf("GET %s: body lacks %q", tc.path, tc.contains)
		}
	}
}
