package agent_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/forkbox/forkbox/internal/guest/agent"
)

type eventJSON struct {
	Time    int64             `json:"time"`
	Level   string            `json:"level"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields"`
}

func (ta *testAgent) events(t *testing.T, after int64) []eventJSON {
	t.Helper()
	resp, err := ta.http.Get(ta.url + "/events?after=" + itoa(after))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /events: %s", resp.Status)
	}
	var out []eventJSON
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// Every process's start and end (with its exit code) are events the daemon
// collects into the sandbox's log; "after" continues where it left off.
func TestEventsRecordProcesses(t *testing.T) {
	ta := startAgent(t, agent.Config{})
	ta.runProcess(t, connect.NewRequest(shell("exit 7")))
	evs := ta.events(t, 0)
	if len(evs) != 2 {
		t.Fatalf("events: %+v", evs)
	}
	start, end := evs[0], evs[1]
	if start.Level != "info" || start.Fields["cmd"] != "/bin/sh" || !strings.Contains(start.Message, "exit 7") {
		t.Errorf("start event: %+v", start)
	}
	if end.Level != "warn" || end.Fields["exitCode"] != "7" || end.Fields["pid"] != start.Fields["pid"] ||
		!strings.Contains(end.Message, "code 7") || end.Time <= start.Time {
		t.Errorf("end event: %+v", end)
	}
	ta.runProcess(t, connect.NewRequest(shell("true")))
	later := ta.events(t, end.Time)
	if len(later) != 2 || later[1].Fields["exitCode"] != "0" || later[1].Level != "info" {
		t.Errorf("events after the first two: %+v", later)
	}
}
