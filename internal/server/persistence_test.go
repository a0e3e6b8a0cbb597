package server

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// state answers GET /sandboxes/{id}'s state.
func (e *env) state(id string) string {
	e.t.Helper()
	resp, data := e.call("GET", "/sandboxes/"+id, nil)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("get %s: %d %s", id, resp.StatusCode, data)
	}
	return decodeObject(e.t, data)["state"].(string)
}

// listIDs answers the ids GET /v2/sandboxes lists with query q.
func (e *env) listIDs(q string) []string {
	e.t.Helper()
	resp, data := e.call("GET", "/v2/sandboxes?"+q, nil)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("list: %d %s", resp.StatusCode, data)
	}
	var ids []string
	for _, sb := range decodeArray(e.t, data) {
		ids = append(ids, sb["sandboxID"].(string))
	}
	return ids
}

// pauseOK pauses id and checks the 204.
func (e *env) pauseOK(id string) {
	e.t.Helper()
	if resp, data := e.call("POST", "/sandboxes/"+id+"/pause", nil); resp.StatusCode != http.StatusNoContent {
		e.t.Fatalf("pause %s: %d %s", id, resp.StatusCode, data)
	}
}

// snapshot takes a snapshot of id through the API and returns its answer.
func (e *env) snapshot(id string, body any) map[string]any {
	e.t.Helper()
	resp, data := e.call("POST", "/sandboxes/"+id+"/snapshots", body)
	if resp.StatusCode != http.StatusCreated {
		e.t.Fatalf("snapshot %s: %d %s", id, resp.StatusCode, data)
	}
	return decodeObject(e.t, data)
}

// envdCall is a data-plane request to id's envd.
func (e *env) envdCall(id string) (*http.Response, []byte) {
	e.t.Helper()
	return e.plane("POST", "/filesystem.Filesystem/Stat", `{"path":"/"}`, "E2b-Sandbox-Id", id)
}

func TestPauseAndConnect(t *testing.T) {
	e := newEnv(t)
	id := e.create(nil)["sandboxID"].(string)
	other := e.create(nil)["sandboxID"].(string)

	e.pauseOK(id)
	if got := e.state(id); got != "paused" {
		t.Fatalf("state after pause: %s", got)
	}
	resp, data := e.call("POST", "/sandboxes/"+id+"/pause", `{"memory":true}`)
	wantError(t, resp, data, http.StatusConflict)
	if !strings.Contains(string(data), "already paused") {
		t.Errorf("second pause: %s", data)
	}
	// E2B's proxy body, as a 502: the SDKs' isRunning() reads only a 502
	// as "not running".
	resp, data = e.envdCall(id)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("data plane of a paused sandbox: %d %s", resp.StatusCode, data)
	}
	if got := decodeObject(t, data); got["sandboxId"] != id || got["message"] != "The sandbox is paused" ||
		got["code"] != float64(http.StatusBadGateway) || got["canAutoResume"] != false {
		t.Errorf("data plane of a paused sandbox: %s", data)
	}
	if got := e.listIDs("state=paused"); !slices.Equal(got, []string{id}) {
		t.Errorf("paused listing: %v", got)
	}
	if got := e.listIDs("state=running"); !slices.Equal(got, []string{other}) {
		t.Errorf("running listing: %v", got)
	}
	if got := e.listIDs(""); len(got) != 2 {
		t.Errorf("default listing: %v", got)
	}
	if _, data := e.call("GET", "/sandboxes", nil); len(decodeArray(t, data)) != 1 {
		t.Errorf("v1 listing shows paused sandboxes: %s", data)
	}

	resp, data = e.call("POST", "/sandboxes/"+id+"/connect", `{"timeout":120}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("connect paused: %d %s", resp.StatusCode, data)
	}
	wantKeys(t, decodeObject(t, data), "templateID", "sandboxID", "clientID", "envdVersion", "domain", "trafficAccessToken")
	if got := e.state(id); got != "running" {
		t.Fatalf("state after connect: %s", got)
	}
	sb, _ := e.mgr.Get(t.Context(), id)
	if left := time.Until(sb.EndAt); left > 121*time.Second || left < 115*time.Second {
		t.Errorf("deadline after resume: %s left, want 120s", left)
	}
	if resp, data := e.envdCall(id); resp.StatusCode != http.StatusOK {
		t.Errorf("data plane after resume: %d %s", resp.StatusCode, data)
	}
	resp, data = e.call("POST", "/v2/sandboxes/"+id+"/connect", `{"timeout":60}`)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("connect running: %d %s", resp.StatusCode, data)
	}

	for _, tc := range []struct {
		name, path, body string
		want             int
	}{
		{"pause unknown", "/sandboxes/nosuch/pause", ``, http.StatusNotFound},
		{"pause bad body", "/sandboxes/" + id + "/pause", `{"memory":"yes"}`, http.StatusBadRequest},
		{"connect unknown", "/sandboxes/nosuch/connect", ``, http.StatusNotFound},
		{"connect negative", "/sandboxes/" + id + "/connect", `{"timeout":-1}`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := e.call("POST", tc.path, tc.body)
			wantError(t, resp, data, tc.want)
		})
	}

	// A paused sandbox can be killed.
	e.pauseOK(other)
	if resp, data := e.call("DELETE", "/sandboxes/"+other, nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("kill paused: %d %s", resp.StatusCode, data)
	}
	resp, data = e.call("GET", "/sandboxes/"+other, nil)
	wantError(t, resp, data, http.StatusNotFound)
}

func TestResume(t *testing.T) {
	e := newEnv(t)
	id := e.create(nil)["sandboxID"].(string)
	resp, data := e.call("POST", "/sandboxes/"+id+"/resume", `{"timeout":60}`)
	wantError(t, resp, data, http.StatusConflict)
	e.pauseOK(id)
	resp, data = e.call("POST", "/sandboxes/"+id+"/resume", `{"timeout":"x"}`)
	wantError(t, resp, data, http.StatusBadRequest)
	resp, data = e.call("POST", "/sandboxes/"+id+"/resume", `{"timeout":60,"autoPause":true}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("resume: %d %s", resp.StatusCode, data)
	}
	if sb := decodeObject(t, data); sb["sandboxID"] != id {
		t.Errorf("resume answer: %v", sb)
	}
	if got := e.state(id); got != "running" {
		t.Errorf("state after resume: %s", got)
	}
	sb, _ := e.mgr.Get(t.Context(), id)
	if left := time.Until(sb.EndAt); left > 61*time.Second || left < 55*time.Second {
		t.Errorf("deadline after resume: %s left, want 60s", left)
	}
	resp, data = e.call("POST", "/sandboxes/nosuch/resume", ``)
	wantError(t, resp, data, http.StatusNotFound)
}

func TestAutoResumeThroughProxy(t *testing.T) {
	e := newEnv(t)
	id := e.create(map[string]any{"templateID": "base", "autoResume": map[string]bool{"enabled": true}})["sandboxID"].(string)
	if resp, data := e.envdCall(id); resp.StatusCode != http.StatusOK {
		t.Fatalf("before pause: %d %s", resp.StatusCode, data)
	}
	e.pauseOK(id)
	if got := e.state(id); got != "paused" {
		t.Fatalf("state after pause: %s", got)
	}
	for _, hdr := range [][]string{
		{"E2b-Sandbox-Id", id},
		{"Host", "49999-" + id + ".sbx.test"},
	} {
		resp, data := e.plane("POST", "/execute", "x=1", hdr...)
		got := decodeEcho(t, resp, data)
		if got.Path != "/execute" || got.Body != "x=1" {
			t.Errorf("echo: %+v", got)
		}
		if st := e.state(id); st != "running" {
			t.Fatalf("state after traffic: %s", st)
		}
		e.pauseOK(id)
	}
}

func TestSnapshots(t *testing.T) {
	e := newEnv(t)
	a := e.create(nil)["sandboxID"].(string)
	b := e.create(nil)["sandboxID"].(string)

	named := e.snapshot(a, map[string]any{"name": "snap-a"})
	wantKeys(t, named, "snapshotID", "names", "sandboxID", "createdAt")
	if names, _ := named["names"].([]any); len(names) != 1 || names[0] != "snap-a" || named["sandboxID"] != a {
		t.Errorf("named snapshot: %v", named)
	}
	withTTL := e.snapshot(a, map[string]any{"ttl": 3600})
	if names, _ := withTTL["names"].([]any); names == nil || len(names) != 0 {
		t.Errorf("names of an unnamed snapshot must be []: %v", withTTL)
	}
	if _, ok := withTTL["expiresAt"]; !ok {
		t.Errorf("snapshot with a TTL has no expiresAt: %v", withTTL)
	}
	e.pauseOK(a)
	fromPaused := e.snapshot(a, nil) // a paused sandbox can be snapshotted and stays paused
	if got := e.state(a); got != "paused" {
		t.Errorf("state after snapshot of paused: %s", got)
	}
	ofB := e.snapshot(b, `{}`)
	if got := e.state(b); got != "running" {
		t.Errorf("state after snapshot: %s", got)
	}
	all := []string{named["snapshotID"].(string), withTTL["snapshotID"].(string), fromPaused["snapshotID"].(string), ofB["snapshotID"].(string)}

	for _, tc := range []struct {
		name, id, body string
		want           int
	}{
		{"unknown sandbox", "nosuch", `{}`, http.StatusNotFound},
		{"name taken", b, `{"name":"snap-a"}`, http.StatusConflict},
		{"name of a template", b, `{"name":"base"}`, http.StatusConflict},
		{"bad name", b, `{"name":"a b"}`, http.StatusBadRequest},
		{"bad json", b, `{"name":`, http.StatusBadRequest},
		{"negative ttl", b, `{"ttl":-1}`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := e.call("POST", "/sandboxes/"+tc.id+"/snapshots", tc.body)
			wantError(t, resp, data, tc.want)
		})
	}

	// Paging over more than one page, following X-Next-Token; newest first.
	newest := slices.Clone(all)
	slices.Reverse(newest)
	var seen []string
	pages := 0
	q := url.Values{"limit": {"3"}}
	for {
		resp, data := e.call("GET", "/snapshots?"+q.Encode(), nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("list: %d %s", resp.StatusCode, data)
		}
		pages++
		for _, s := range decodeArray(t, data) {
			wantKeys(t, s, "snapshotID", "names", "sandboxID", "createdAt")
			seen = append(seen, s["snapshotID"].(string))
		}
		next := resp.Header.Get("X-Next-Token")
		if next == "" {
			break
		}
		q.Set("nextToken", next)
	}
	if pages != 2 || !slices.Equal(seen, newest) {
		t.Errorf("%d pages: %v, want %v", pages, seen, newest)
	}

	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"sandboxID=" + a, newest[1:]},
		{"sandboxID=" + b, newest[:1]},
		{"name=snap-a:default", all[:1]},
		{"name=snap-a:v1", nil},
		{"sandboxID=nosuch", nil},
		{"name=snap-a", all[:1]},
		{"name=" + all[1], all[1:2]},
		{"name=snap-a&sandboxID=" + b, nil},
		{"name=nosuch", nil},
	} {
		resp, data := e.call("GET", "/snapshots?"+tc.query, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.query, resp.StatusCode, data)
		}
		var got []string
		for _, s := range decodeArray(t, data) {
			got = append(got, s["snapshotID"].(string))
		}
		if !slices.Equal(got, tc.want) || resp.Header.Get("X-Next-Token") != "" {
			t.Errorf("%s: %v (next %q), want %v", tc.query, got, resp.Header.Get("X-Next-Token"), tc.want)
		}
	}
	for _, bad := range []string{"limit=0", "limit=101", "limit=x", "nextToken=abc"} {
		resp, data := e.call("GET", "/snapshots?"+bad, nil)
		wantError(t, resp, data, http.StatusBadRequest)
	}

	// A snapshot id (or name) works as a templateID; the snapshot outlives
	// its sandbox.
	if resp, data := e.call("DELETE", "/sandboxes/"+b, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("kill: %d %s", resp.StatusCode, data)
	}
	for _, tpl := range []string{all[3], "snap-a"} {
		sb := e.create(map[string]any{"templateID": tpl})
		if got := e.state(sb["sandboxID"].(string)); got != "running" {
			t.Errorf("sandbox from %s: %s", tpl, got)
		}
	}
	if resp, data := e.call("DELETE", "/templates/"+all[1], nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete snapshot: %d %s", resp.StatusCode, data)
	}
	for _, c := range []struct{ method, path, body string }{
		{"DELETE", "/templates/" + all[1], ""},
		{"DELETE", "/templates/nosuch", ""},
		{"POST", "/sandboxes", `{"templateID":"` + all[1] + `"}`},
	} {
		resp, data := e.call(c.method, c.path, c.body)
		wantError(t, resp, data, http.StatusNotFound)
	}
	if _, data := e.call("GET", "/snapshots?name="+all[1], nil); len(decodeArray(t, data)) != 0 {
		t.Errorf("deleted snapshot still listed: %s", data)
	}
}

// forkSandboxes answers the sandbox ids of a fork answer and its errors.
