package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/cluster"
	"github.com/forkbox/forkbox/internal/store"
)

// withNodes gives the server a node registry over its own records, with
// this node "node-a" registered and "node-b" registered with a lease
// that has run out.
func withNodes(t *testing.T) func(*Config) {
	return func(c *Config) {
		ctx := context.Background()
		st := c.Keys.(*store.Store)
		reg, err := cluster.New(cluster.Config{Store: st, NodeID: "node-a", URL: "http://127.0.0.1:3000", Logger: c.Logger,
			Probe: func() store.Report { return store.Report{Capacity: 5, CPUs: 2, FreeMemoryMiB: 1024, Version: "test"} }})
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Register(ctx); err != nil {
			t.Fatal(err)
		}
		past := time.Now().Add(-time.Minute)
		if _, err := st.HeartbeatNode(ctx, &store.Node{ID: "node-b", URL: "http://127.0.0.2:3000", StartedAt: past, HeartbeatAt: past, LeaseUntil: past.Add(10 * time.Second)}); err != nil {
			t.Fatal(err)
		}
		c.Nodes = reg
	}
}

// TestNodesAPI: list and get report the nodes with their states, an
// unknown node is 404, drain and undrain answer the node, and while this
// node is drained creates, forks and clones answer 503 naming it while
// its own sandboxes still run.
func TestNodesAPI(t *testing.T) {
	e := newEnv(t, withNodes(t))
	resp, data := e.call("GET", "/nodes", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %d %s", resp.StatusCode, data)
	}
	list := decodeArray(t, data)
	if len(list) != 2 || list[0]["nodeID"] != "node-a" || list[0]["state"] != "alive" || list[0]["self"] != true || list[1]["state"] != "dead" {
		t.Fatalf("list: %s", data)
	}
	wantKeys(t, list[0], "nodeID", "url", "state", "draining", "capacity", "running", "freeMemoryMiB", "cpus", "version", "heartbeatAt", "leaseUntil")
	for _, path := range []string{"/nodes/nope", "/nodes/nope/drain", "/nodes/nope/undrain"} {
		method := "POST"
		if path == "/nodes/nope" {
			method = "GET"
		}
		if resp, data := e.call(method, path, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s: %d %s, want 404", method, path, resp.StatusCode, data)
		}
	}
	sb := e.create(nil)
	resp, data = e.call("POST", "/nodes/node-a/drain", nil)
	if n := decodeObject(t, data); resp.StatusCode != http.StatusOK || n["state"] != "draining" || n["draining"] != true {
		t.Fatalf("drain: %d %s", resp.StatusCode, data)
	}
	for _, path := range []string{"/sandboxes", "/v2/sandboxes", "/sandboxes/" + sb["sandboxID"].(string) + "/fork", "/sandboxes/" + sb["sandboxID"].(string) + "/clone"} {
		resp, data := e.call("POST", path, map[string]any{"templateID": "base"})
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(data), "node node-a is draining") {
			t.Errorf("POST %s on a drained node: %d %s, want 503 naming the node", path, resp.StatusCode, data)
		}
	}
	if resp, data := e.call("GET", "/sandboxes/"+sb["sandboxID"].(string), nil); resp.StatusCode != http.StatusOK {
		t.Errorf("get a drained node's sandbox: %d %s", resp.StatusCode, data)
	}
	if resp, data := e.call("GET", "/nodes/node-a", nil); resp.StatusCode != http.StatusOK || decodeObject(t, data)["state"] != "draining" {
		t.Errorf("get: %d %s", resp.StatusCode, data)
	}
	if resp, data := e.call("POST", "/nodes/node-a/undrain", nil); resp.StatusCode != http.StatusOK || decodeObject(t, data)["state"] != "alive" {
		t.Fatalf("undrain: %d %s", resp.StatusCode, data)
	}
	e.create(nil)
}

// TestRemoveNode: DELETE /nodes/{id} removes a dead node (204, then 404);
// a live one is 409 saying why, an unknown one 404.
func TestRemoveNode(t *testing.T) {
	e := newEnv(t, withNodes(t))
	for path, want := range map[string]int{"/nodes/nope": http.StatusNotFound, "/nodes/node-a": http.StatusConflict} {
		if resp, data := e.call("DELETE", path, nil); resp.StatusCode != want {
			t.Errorf("DELETE %s: %d %s, want %d", path, resp.StatusCode, data, want)
		} else if want == http.StatusConflict && !strings.Contains(string(data), "only a dead node can be removed") {
			t.Errorf("DELETE of a live node says %s", data)
		}
	}
	if resp, data := e.call("DELETE", "/nodes/node-b", nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE a dead node: %d %s, want 204", resp.StatusCode, data)
	}
	if resp, _ := e.call("GET", "/nodes/node-b", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET a removed node: %d, want 404", resp.StatusCode)
	}
	if _, data := e.call("GET", "/nodes", nil); len(decodeArray(t, data)) != 1 {
		t.Errorf("list after the removal: %s", data)
	}
}

// TestNodesWithoutRegistry: a server without a registry answers /nodes
// 501 and creates as before.
func TestNodesWithoutRegistry(t *testing.T) {
	e := newEnv(t)
	if resp, _ := e.call("GET", "/nodes", nil); resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("GET /nodes: %d, want 501", resp.StatusCode)
	}
	e.create(nil)
}

// TestNodesNeedKey: the node routes are control routes: no key, 401.
func TestNodesNeedKey(t *testing.T) {
	e := newEnv(t, withNodes(t))
	for _, r := range []struct{ method, path string }{{"GET", "/nodes"}, {"POST", "/nodes/node-a/drain"}, {"DELETE", "/nodes/node-b"}} {
		req, _ := http.NewRequest(r.method, e.srv.URL+r.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s without a key: %d, want 401", r.method, r.path, resp.StatusCode)
		}
	}
}
