package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLogsFollowKeepsEqualLines: `sandbox logs -f` asks again from the last
// entry's millisecond (the cursor is inclusive), and must print every line
// once — two identical lines in one millisecond included — then what came
// after, until the sandbox is gone. The server answers as the daemon does:
// every entry at or after the cursor, equal times in write order.
func TestLogsFollowKeepsEqualLines(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_123)
	type entry struct {
		Timestamp time.Time `json:"timestamp"`
		Level     string    `json:"level"`
		Message   string    `json:"message"`
	}
	log := [][]entry{
		{{t0, "info", "process exited: echo hi (exit 0)"}, {t0, "info", "process exited: echo hi (exit 0)"}},
		{{t0, "info", "process exited: echo hi (exit 0)"}, {t0, "info", "process exited: echo hi (exit 0)"},
			{t0, "info", "sandbox paused"}, {t0.Add(time.Millisecond), "info", "sandbox resumed"}},
	}
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !strings.HasSuffix(r.URL.Path, "/v2/sandboxes/sbx1/logs") {
			t.Errorf("request %s", r.URL)
		}
		if calls >= len(log) {
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]any{"code": 404, "message": "sandbox sbx1 not found"})
			return
		}
		if calls > 0 && r.URL.Query().Get("cursor") != "1700000000123" {
			t.Errorf("poll %d: cursor %q, want the last entry's millisecond", calls, r.URL.Query().Get("cursor"))
		}
		json.NewEncoder(w).Encode(map[string]any{"logs": log[calls]})
		calls++
	}))
	defer srv.Close()
	r := runEnv(t, map[string]string{"FORKBOX_API_URL": srv.URL, "FORKBOX_API_KEY": "k"}, "", nil, "sandbox", "logs", "sbx1", "-f")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		got = append(got, strings.TrimSpace(l[strings.Index(l, "INFO")+4:]))
	}
	want := []string{"process exited: echo hi (exit 0)", "process exited: echo hi (exit 0)", "sandbox paused", "sandbox resumed"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("printed\n%s\nwant the lines %q", r.stdout, want)
	}
}
