package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
)

// TestCodeInterpreterKeepalive runs a cell that is silent for 14 s through
// the daemon's data plane, as the E2B SDK's runCode sends it, and checks
// that the stream carries {"type":"keepalive"} every 5 s meanwhile (as
// E2B's server does, so proxies and clients see a live stream), then the
// cell's output, its result and end_of_execution.
func TestCodeInterpreterKeepalive(t *testing.T) {
	ctx, c, sb := codeInterpreterSandbox(t, 2*time.Minute)
	code := "import time\nprint('start', flush=True)\ntime.sleep(14)\nprint('done')\n'end'"
	body, _ := json.Marshal(map[string]string{"code": code})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.SandboxURL()+"/execute", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("E2b-Sandbox-Id", sb.SandboxID)
	req.Header.Set("E2b-Sandbox-Port", "49999")
	if sb.EnvdAccessToken != "" {
		req.Header.Set("X-Access-Token", sb.EnvdAccessToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /execute: %s", resp.Status)
	}
	var types []string
	var started time.Time
	var keepalives []time.Duration // after the cell's first output
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev struct{ Type, Text string }
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("bad event %q: %v", sc.Text(), err)
		}
		types = append(types, ev.Type)
		switch {
		case ev.Type == "stdout" && ev.Text == "start\n":
			started = time.Now()
		case ev.Type == "keepalive" && !started.IsZero():
			keepalives = append(keepalives, time.Since(started))
		}
	}
	t.Logf("events %v; keepalives at %v after the cell's first output", types, keepalives)
	if len(types) == 0 || types[len(types)-1] != "end_of_execution" {
		t.Fatalf("the stream did not end with end_of_execution: %v", types)
	}
	if len(keepalives) != 2 {
		t.Fatalf("%d keepalives during 14 silent seconds, want 2 (one per 5 s)", len(keepalives))
	}
	for i, at := range keepalives {
		want := time.Duration(i+1) * 5 * time.Second
		if at < want-time.Second || at > want+2*time.Second {
			t.Errorf("keepalive %d at %v after the output, want about %v", i+1, at, want)
		}
	}
}

// codeInterpreterSandbox starts a daemon and a code-interpreter-v1 sandbox
// for the test (killed at its end), returning a context that ends after
// timeout and the daemon's client.
func codeInterpreterSandbox(t *testing.T, timeout time.Duration) (context.Context, *client.Client, *client.Sandbox) {
	t.Helper()
	d := startDaemon(t)
	c := client.New(d.URL, d.APIKey)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "code-interpreter-v1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.KillSandbox(context.Background(), sb.SandboxID) })
	return ctx, c, sb
}
