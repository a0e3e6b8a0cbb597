package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/runtime"
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
	e.rt.failRestore = failNth(e.rt.restores.Load() + 2)
	resp, data = e.call("POST", "/sandboxes/"+src+"/fork", `{"count":3}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("fork with a failure: %d %s", resp.StatusCode, data)
	}
	if ids, errs := forkEntries(t, data); len(ids) != 2 || len(errs) != 1 || errs[0]["code"].(float64) < 400 {
		t.Errorf("fork with a failure: %s", data)
	}
}

// failNth makes the fake runtime's Restore call number n fail.
func failNth(n int64) func(int64, runtime.Spec) error {
	return func(i int64, spec runtime.Spec) error {
		if i == n {
			return errors.New("injected restore failure")
		}
		return nil
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
	e.rt.failRestore = failNth(2)
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
	e.rt.failRestore = failNth(e.rt.restores.Load() + 1)
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
	e.rt.failRestore = func(int64, runtime.Spec) error { return errors.New("injected") }
	resp, data = e.call("POST", "/sandboxes/"+src+"/clone", `{"count":2}`)
	if resp.StatusCode < 400 {
		t.Fatalf("clone where nothing started: %d %s", resp.StatusCode, data)
	}
	wantError(t, resp, data, resp.StatusCode)
}

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
