package server

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/runtime"
)

func forkEntries(t *testing.T, data []byte) (ids []string, errs []map[string]any) {
	t.Helper()
	for _, entry := range decodeArray(t, data) {
		sb, hasSB := entry["sandbox"].(map[string]any)
		er, hasErr := entry["error"].(map[string]any)
		if hasSB == hasErr {
			t.Fatalf("fork entry must hold exactly one of sandbox and error: %v", entry)
		}
		if hasSB {
			wantKeys(t, sb, "templateID", "sandboxID", "clientID", "envdVersion", "domain", "trafficAccessToken")
			ids = append(ids, sb["sandboxID"].(string))
			continue
		}
		wantKeys(t, er, "code", "message")
		errs = append(errs, er)
	}
	return ids, errs
}

func TestFork(t *testing.T) {
	e := newEnv(t)
	src := e.create(map[string]any{"templateID": "base", "timeout": 600})["sandboxID"].(string)

	resp, data := e.call("POST", "/sandboxes/"+src+"/fork", `{"count":3,"timeout":120}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("fork: %d %s", resp.StatusCode, data)
	}
	ids, errs := forkEntries(t, data)
	if len(ids) != 3 || len(errs) != 0 {
		t.Fatalf("fork of 3: %s", data)
	}
	for _, id := range ids {
		if got := e.state(id); got != "running" {
			t.Errorf("fork %s: %s", id, got)
		}
		sb, _ := e.mgr.Get(t.Context(), id)
		if left := time.Until(sb.EndAt); left > 121*time.Second || left < 115*time.Second {
			t.Errorf("fork deadline: %s left, want 120s", left)
		}
		if resp, data := e.envdCall(id); resp.StatusCode != http.StatusOK {
			t.Errorf("fork data plane: %d %s", resp.StatusCode, data)
		}
	}
	if got := e.state(src); got != "running" {
		t.Errorf("source after fork: %s", got)
	}
	if got := e.listIDs(""); len(got) != 4 {
		t.Errorf("listing after fork: %v", got)
	}

	// No body: one fork.
	resp, data = e.call("POST", "/sandboxes/"+src+"/fork", nil)
	if ids, _ := forkEntries(t, data); resp.StatusCode != http.StatusCreated || len(ids) != 1 {
		t.Errorf("default fork: %d %s", resp.StatusCode, data)
	}

	for _, tc := range []struct {
		name, id, body string
		want           int
	}{
		{"count 0", src, `{"count":0}`, http.StatusBadRequest},
		{"count 101", src, `{"count":101}`, http.StatusBadRequest},
		{"count -1", src, `{"count":-1}`, http.StatusBadRequest},
		{"count string", src, `{"count":"3"}`, http.StatusBadRequest},
		{"negative timeout", src, `{"count":1,"timeout":-5}`, http.StatusBadRequest},
		{"unknown", "nosuch", `{"count":1}`, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := e.call("POST", "/sandboxes/"+tc.id+"/fork", tc.body)
			wantError(t, resp, data, tc.want)
		})
	}

	// Each fork fails or succeeds on its own.
	e.failNthRestore(2)
	resp, data = e.call("POST", "/sandboxes/"+src+"/fork", `{"count":3}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("fork with a failure: %d %s", resp.StatusCode, data)
	}
	if ids, errs := forkEntries(t, data); len(ids) != 2 || len(errs) != 1 || errs[0]["code"].(float64) < 400 {
		t.Errorf("fork with a failure: %s", data)
	}
}

func TestClone(t *testing.T) {
	e := newEnv(t)
	src := e.create(map[string]any{"templateID": "base", "secure": true, "autoResume": true})["sandboxID"].(string)

	resp, data := e.call("POST", "/sandboxes/"+src+"/clone", `{"count":2,"strict":true,"timeout":300}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("clone: %d %s", resp.StatusCode, data)
	}
	out := decodeObject(t, data)
	wantKeys(t, out, "sandboxes", "count", "snapshotTemplateId")
	sbs, _ := out["sandboxes"].([]any)
	snapID, _ := out["snapshotTemplateId"].(string)
	if len(sbs) != 2 || out["count"] != 2.0 || snapID == "" {
		t.Fatalf("clone answer: %s", data)
	}
	var clones []string
	for _, v := range sbs {
		sb := v.(map[string]any)
		wantKeys(t, sb, "sandboxID", "clientID", "envdVersion", "envdAccessToken", "trafficAccessToken")
		if sb["clientID"] != "" || sb["envdAccessToken"] == "" {
			t.Errorf("clone entry: %v", sb)
		}
		clones = append(clones, sb["sandboxID"].(string))
		if got := e.state(sb["sandboxID"].(string)); got != "running" {
			t.Errorf("clone state: %s", got)
		}
	}
	// The clone's snapshot is in use by the source and its clones.
	resp, data = e.call("DELETE", "/templates/"+snapID, nil)
	wantError(t, resp, data, http.StatusConflict)

	// A paused source stays paused.
	e.pauseOK(src)
	resp, data = e.call("POST", "/sandboxes/"+src+"/clone", `{"count":1}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("clone of paused: %d %s", resp.StatusCode, data)
	}
	if got := e.state(src); got != "paused" {
		t.Errorf("paused source after clone: %s", got)
	}
	for _, tc := range []struct {
		name, id, body string
		want           int
	}{
		{"count 0", src, `{"count":0}`, http.StatusBadRequest},
		{"count 101", src, `{"count":101}`, http.StatusBadRequest},
		{"strict not bool", src, `{"count":1,"strict":"yes"}`, http.StatusBadRequest},
		{"unknown", "nosuch", `{"count":1}`, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := e.call("POST", "/sandboxes/"+tc.id+"/clone", tc.body)
			wantError(t, resp, data, tc.want)
		})
	}
}

func TestCloneStrictFailureLeavesNothing(t *testing.T) {
	e := newEnv(t)
	src := e.create(nil)["sandboxID"].(string)
	e.failNthRestore(2)
	resp, data := e.call("POST", "/sandboxes/"+src+"/clone", `{"count":3,"strict":true}`)
	if resp.StatusCode < 400 {
		t.Fatalf("strict clone with a failure: %d %s", resp.StatusCode, data)
	}
	wantError(t, resp, data, resp.StatusCode)
	if got := e.listIDs(""); !slices.Equal(got, []string{src}) {
		t.Errorf("sandboxes left after a failed strict clone: %v", got)
	}
	if _, data := e.call("GET", "/snapshots", nil); len(decodeArray(t, data)) != 0 {
		t.Errorf("snapshot left after a failed strict clone: %s", data)
	}
	if got := e.state(src); got != "running" {
		t.Errorf("source after failed clone: %s", got)
	}

	// Not strict: what started is returned.
	e.failNthRestore(1)
	resp, data = e.call("POST", "/sandboxes/"+src+"/clone", `{"count":3}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("lenient clone with a failure: %d %s", resp.StatusCode, data)
	}
	if out := decodeObject(t, data); out["count"] != 2.0 || len(out["sandboxes"].([]any)) != 2 {
		t.Errorf("lenient clone: %s", data)
	}
	if got := e.listIDs(""); len(got) != 3 {
		t.Errorf("sandboxes after a lenient clone: %v", got)
	}

	// Not strict, nothing started: an error.
	e.rt.FailRestore = func(runtime.Spec, string) error { return errors.New("injected") }
	resp, data = e.call("POST", "/sandboxes/"+src+"/clone", `{"count":2}`)
	if resp.StatusCode < 400 {
		t.Fatalf("clone where nothing started: %d %s", resp.StatusCode, data)
	}
	wantError(t, resp, data, resp.StatusCode)
}
