package server

import (
	"encoding/json"
	"net/http"
	"testing"
)

func TestRollback(t *testing.T) {
	e := newEnv(t)
	a := e.create(nil)["sandboxID"].(string)
	b := e.create(nil)["sandboxID"].(string)
	snapA := e.snapshot(a, map[string]any{"name": "a-v1"})["snapshotID"].(string)
	snapB := e.snapshot(b, nil)["snapshotID"].(string)

	resp, data := e.call("POST", "/sandboxes/"+a+"/rollback", map[string]string{"snapshotID": snapA})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("rollback: %d %s", resp.StatusCode, data)
	}
	got := decodeObject(t, data)
	if got["sandboxID"] != a || got["snapshotID"] != snapA || got["status"] != "running" {
		t.Errorf("rollback answer: %v", got)
	}
	if resp, data := e.envdCall(a); resp.StatusCode != http.StatusOK {
		t.Errorf("data plane after rollback: %d %s", resp.StatusCode, data)
	}
	// By name, and from paused.
	e.pauseOK(a)
	resp, data = e.call("POST", "/sandboxes/"+a+"/rollback", `{"snapshotID":"a-v1"}`)
	if resp.StatusCode != http.StatusOK || decodeObject(t, data)["snapshotID"] != snapA {
		t.Errorf("rollback by name from paused: %d %s", resp.StatusCode, data)
	}
	if st := e.state(a); st != "running" {
		t.Errorf("state after rollback: %s", st)
	}

	// A fork of a may roll back to a's snapshot (its lineage).
	_, data = e.call("POST", "/sandboxes/"+a+"/fork", `{"count":1}`)
	ids, _ := forkEntries(t, data)
	if len(ids) != 1 {
		t.Fatalf("fork: %s", data)
	}
	if resp, data := e.call("POST", "/sandboxes/"+ids[0]+"/rollback", map[string]string{"snapshotID": snapA}); resp.StatusCode != http.StatusOK {
		t.Errorf("rollback of a fork to its ancestor's snapshot: %d %s", resp.StatusCode, data)
	}

	for _, tc := range []struct {
		name, id, body string
		want           int
	}{
		{"other lineage", a, `{"snapshotID":"` + snapB + `"}`, http.StatusBadRequest},
		{"other lineage reverse", b, `{"snapshotID":"` + snapA + `"}`, http.StatusBadRequest},
		{"a template", a, `{"snapshotID":"base"}`, http.StatusBadRequest},
		{"no snapshot", a, `{}`, http.StatusBadRequest},
		{"no body", a, ``, http.StatusBadRequest},
		{"unknown snapshot", a, `{"snapshotID":"nosuch"}`, http.StatusNotFound},
		{"unknown sandbox", "nosuch", `{"snapshotID":"` + snapA + `"}`, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := e.call("POST", "/sandboxes/"+tc.id+"/rollback", tc.body)
			wantError(t, resp, data, tc.want)
		})
	}
	if st := e.state(b); st != "running" {
		t.Errorf("b after refused rollback: %s", st)
	}
}

// lineageNode is the JSON of sandbox.LineageNode, as clients decode it.
type lineageNode struct {
	ID       string         `json:"id"`
	Kind     string         `json:"kind"`
	ParentID string         `json:"parentId"`
	Origin   string         `json:"origin"`
	State    string         `json:"state"`
	Children []*lineageNode `json:"children"`
}

func (n *lineageNode) find(id string) *lineageNode {
	if n.ID == id {
		return n
	}
	for _, c := range n.Children {
		if f := c.find(id); f != nil {
			return f
		}
	}
	return nil
}

func TestLineage(t *testing.T) {
	e := newEnv(t)
	src := e.create(nil)["sandboxID"].(string)
	unrelated := e.create(nil)["sandboxID"].(string)
	snap := e.snapshot(src, map[string]any{"name": "v1"})["snapshotID"].(string)
	restored := e.create(map[string]any{"templateID": snap})["sandboxID"].(string)
	_, data := e.call("POST", "/sandboxes/"+src+"/clone", `{"count":2}`)
	out := decodeObject(t, data)
	cloneSnap := out["snapshotTemplateId"].(string)
	var clones []string
	for _, v := range out["sandboxes"].([]any) {
		clones = append(clones, v.(map[string]any)["sandboxID"].(string))
	}
	if len(clones) != 2 {
		t.Fatalf("clone: %s", data)
	}

	for _, from := range []string{src, clones[1], restored, snap} {
		resp, data := e.call("GET", "/sandboxes/"+from+"/lineage", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("lineage of %s: %d %s", from, resp.StatusCode, data)
		}
		var root lineageNode
		if err := json.Unmarshal(data, &root); err != nil {
			t.Fatalf("decode %s: %v", data, err)
		}
		if root.ID != src || root.Kind != "sandbox" || root.State != "running" {
			t.Errorf("lineage of %s: root %+v", from, root)
		}
		for _, want := range []struct{ id, kind, parent string }{
			{snap, "snapshot", src},
			{restored, "sandbox", snap},
			{cloneSnap, "snapshot", src},
			{clones[0], "sandbox", cloneSnap},
			{clones[1], "sandbox", cloneSnap},
		} {
			n := root.find(want.id)
			if n == nil || n.Kind != want.kind || n.ParentID != want.parent {
				t.Errorf("lineage of %s: node %s = %+v, want kind %s parent %s", from, want.id, n, want.kind, want.parent)
			}
		}
		if root.find(unrelated) != nil {
			t.Errorf("lineage of %s holds an unrelated sandbox", from)
		}
	}
	resp, data := e.call("GET", "/sandboxes/nosuch/lineage", nil)
	wantError(t, resp, data, http.StatusNotFound)
}
