package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

type logsV2 struct {
	Logs []struct {
		Timestamp string            `json:"timestamp"`
		Level     string            `json:"level"`
		Message   string            `json:"message"`
		Fields    map[string]string `json:"fields"`
	} `json:"logs"`
}

func (e *env) logsV2(id, q string) logsV2 {
	e.t.Helper()
	resp, data := e.call("GET", "/v2/sandboxes/"+id+"/logs?"+q, nil)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("logs: %d %s", resp.StatusCode, data)
	}
	var out logsV2
	if err := json.Unmarshal(data, &out); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (l logsV2) messages() []string {
	var out []string
	for _, e := range l.Logs {
		out = append(out, e.Message)
	}
	return out
}

// The lifecycle of a sandbox shows in its logs, in both routes' shapes.
func TestLogsLifecycle(t *testing.T) {
	e := newEnv(t)
	id := e.create(nil)["sandboxID"].(string)
	e.pauseOK(id)
	if err := e.mgr.WaitIdle(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if resp, data := e.call("POST", "/sandboxes/"+id+"/connect", `{"timeout":60}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("connect: %d %s", resp.StatusCode, data)
	}
	e.snapshot(id, nil)

	got := e.logsV2(id, "")
	want := []string{"sandbox created", "sandbox paused", "sandbox resumed", "snapshot taken"}
	if fmt.Sprint(got.messages()) != fmt.Sprint(want) {
		t.Fatalf("v2 logs %q, want %q", got.messages(), want)
	}
	if f := got.Logs[0].Fields; f["template"] != "base" || f["logger"] != "forkbox.lifecycle" || got.Logs[0].Level != "info" {
		t.Errorf("created entry: %+v", got.Logs[0])
	}
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"limit=2", want[:2]},
		{"direction=backward&limit=1", want[3:]},
		{"search=paused", want[1:2]},
		{"search=PAUSED", nil},
		{"level=warn", nil},
		{"limit=0", nil},
		{fmt.Sprintf("cursor=%d", time.Now().Add(time.Hour).UnixMilli()), nil},
		{"cursor=0&level=info", want},
	} {
		if got := e.logsV2(id, tc.q).messages(); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %q, want %q", tc.q, got, tc.want)
		}
	}

	resp, data := e.call("GET", "/sandboxes/"+id+"/logs?limit=2&start=0", nil)
	var v1 struct {
		Logs []struct {
			Timestamp string `json:"timestamp"`
			Line      string `json:"line"`
		} `json:"logs"`
		LogEntries []map[string]any `json:"logEntries"`
	}
	if err := json.Unmarshal(data, &v1); err != nil || resp.StatusCode != http.StatusOK || len(v1.Logs) != 2 || len(v1.LogEntries) != 2 {
		t.Fatalf("v1 logs: %d %s", resp.StatusCode, data)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(v1.Logs[1].Line), &line); err != nil {
		t.Fatalf("v1 line is not JSON: %q", v1.Logs[1].Line)
	}
	if line["level"] != "info" || line["logger"] != "forkbox.lifecycle" || line["message"] != "sandbox paused" {
		t.Errorf("v1 line: %v", line)
	}

	for _, bad := range []string{"limit=1001", "limit=x", "cursor=x", "direction=up", "level=loud"} {
		resp, data := e.call("GET", "/v2/sandboxes/"+id+"/logs?"+bad, nil)
		wantError(t, resp, data, http.StatusBadRequest)
	}
	resp, data = e.call("GET", "/sandboxes/nosuch/logs", nil)
	wantError(t, resp, data, http.StatusNotFound)
	if resp, data := e.call("DELETE", "/sandboxes/"+id, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("kill: %d %s", resp.StatusCode, data)
	}
	resp, data = e.call("GET", "/v2/sandboxes/"+id+"/logs", nil)
	wantError(t, resp, data, http.StatusNotFound)
}
