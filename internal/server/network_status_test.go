package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/egress"
	"github.com/forkbox/forkbox/internal/eventlog"
	"github.com/forkbox/forkbox/internal/netpolicy"
)

// TestNetworkStatus: GET /sandboxes/{id}/network reports the rules and
// the sandbox's denials; a denial event appended for it is in its log;
// an unknown sandbox is 404 and gets no log.
func TestNetworkStatus(t *testing.T) {
	den := egress.NewDenials()
	e := newEnv(t, func(c *Config) { c.Egress = den })
	sb := e.create(map[string]any{"templateID": "base", "network": map[string]any{"denyOut": []string{"198.51.100.7"}}})
	id := sb["sandboxID"].(string)
	d := netpolicy.Denial{Time: time.Now(), Layer: netpolicy.LayerProxy, Destination: "198.51.100.7:443",
		Name: "no.example", Reason: netpolicy.ReasonName, Rule: "name no.example not in allowOut"}
	den.Proxy(id, d)
	resp, data := e.call("GET", "/sandboxes/"+id+"/network", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET network: %d %s", resp.StatusCode, data)
	}
	got := decodeObject(t, data)
	dn, _ := got["denials"].(map[string]any)
	by, _ := dn["byReason"].(map[string]any)
	recent, _ := dn["recent"].([]any)
	if dn["total"] != 1.0 || by["name"] != 1.0 || len(recent) != 1 || !strings.Contains(string(data), `"denyOut":["198.51.100.7/32"]`) {
		t.Errorf("network status = %s", data)
	}
	if err := e.mgr.AppendEvent(id, eventlog.Event{Time: d.Time, Level: eventlog.LevelWarn, Logger: eventlog.LoggerEgress,
		Message: "egress denied: 198.51.100.7:443 (no.example)", Fields: map[string]string{"rule": d.Rule}}); err != nil {
		t.Fatal(err)
	}
	_, data = e.call("GET", "/v2/sandboxes/"+id+"/logs", nil)
	if !strings.Contains(string(data), "egress denied: 198.51.100.7:443 (no.example)") {
		t.Errorf("logs lack the denial: %s", data)
	}
	if resp, _ := e.call("GET", "/sandboxes/nosuch/network", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown sandbox: %d, want 404", resp.StatusCode)
	}
	if err := e.mgr.AppendEvent("nosuch", eventlog.Event{Time: time.Now(), Message: "x"}); err == nil {
		t.Error("event appended for an unknown sandbox")
	}
}
