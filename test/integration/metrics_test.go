package integration

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// TestPrometheusMetrics scrapes the daemon's /metrics after a create, a
// pause and a clone of the paused sandbox: the operations' counters and
// latency histograms, sandboxes by state, committed memory, the quota, the
// standby fill and the agent gate (a file written through the data plane)
// are there with the values those calls leave; without the API key the
// scrape is a 401.
func TestPrometheusMetrics(t *testing.T) {
	ctx := daemontest.Context(t)
	d, c := start(t)
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base"})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, ctx, sb.Conn(), "/tmp/through-the-gate", "x") // a data-plane request
	if err := c.Pause(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	res, err := c.Clone(ctx, sb.SandboxID, client.CloneOptions{Count: 1})
	if err != nil || len(res.Sandboxes) != 1 {
		t.Fatalf("clone: %+v %v", res, err)
	}

	if code, _ := scrape(t, ctx, d.URL, ""); code != http.StatusUnauthorized {
		t.Fatalf("scrape without a key: %d, want 401", code)
	}
	var text string
	waitFor(t, 10*time.Second, func() bool {
		_, text = scrape(t, ctx, d.URL, d.APIKey)
		return metric(text, `forkbox_operations_total{op="pause",outcome="ok"}`) == 1
	})
	for series, want := range map[string]float64{
		`forkbox_agent_gate_waiting`:                                         0,
		`forkbox_operations_total{op="create",outcome="ok"}`:                 1,
		`forkbox_operations_total{op="pause",outcome="ok"}`:                  1,
		`forkbox_operations_total{op="clone",outcome="ok"}`:                  1,
		`forkbox_operations_total{op="create",outcome="error"}`:              0,
		`forkbox_operation_duration_seconds_count{op="create",outcome="ok"}`: 1,
		`forkbox_operation_duration_seconds_count{op="clone",outcome="ok"}`:  1,
		`forkbox_sandboxes{state="paused"}`:                                  1,
		`forkbox_sandboxes{state="running"}`:                                 1,
		`forkbox_standby_target`:                                             2,
	} {
		if got := metric(text, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	for _, series := range []string{`forkbox_max_sandboxes`, `forkbox_committed_memory_bytes`, `forkbox_operation_duration_seconds_sum{op="pause",outcome="ok"}`,
		`forkbox_agent_gate_slots`, `forkbox_agent_gate_requests_total`} {
		if got := metric(text, series); got <= 0 {
			t.Errorf("%s = %v, want > 0", series, got)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// scrape GETs /metrics with the key as a bearer token (as Prometheus'
// authorization.credentials_file sends it), if any.
func scrape(t *testing.T, ctx context.Context, url, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric returns the value of one series of a text-format scrape (-1 if
// it is absent).
func metric(text, series string) float64 {
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}
