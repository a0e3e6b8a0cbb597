package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHealthNeedsNoKey(t *testing.T) {
	e := newEnv(t)
	resp, err := http.Get(e.srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %d", resp.StatusCode)
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name   string
		header string
		value  string
		want   int
	}{
		{"none", "", "", http.StatusUnauthorized},
		{"wrong key", "X-API-Key", "e2b_ffff", http.StatusUnauthorized},
		{"wrong bearer", "Authorization", "Bearer e2b_ffff", http.StatusUnauthorized},
		{"key", "X-API-Key", testKey, http.StatusOK},
		{"key any case", "x-api-key", testKey, http.StatusOK},
		{"bearer", "Authorization", "Bearer " + testKey, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", e.srv.URL+"/v2/sandboxes", nil)
			if tc.header != "" {
				req.Header.Set(tc.header, tc.value)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var data json.RawMessage
			json.NewDecoder(resp.Body).Decode(&data)
			if tc.want == http.StatusOK {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, data)
				}
				return
			}
			wantError(t, resp, data, tc.want)
		})
	}
}

func TestCreate(t *testing.T) {
	e := newEnv(t)
	sb := e.create(map[string]any{
		"templateID": "base", "timeout": 60, "metadata": map[string]string{"a": "b"},
		"envVars": map[string]string{"X": "1"}, "cpuCount": 4, "memoryMB": 1024,
		"autoResume": map[string]bool{"enabled": true}, "mcp": nil, "volumeMounts": []any{},
	})
	wantKeys(t, sb, "templateID", "sandboxID", "clientID", "envdVersion", "alias", "domain", "trafficAccessToken")
	if sb["templateID"] != "base" || sb["alias"] != "base-alias" || sb["domain"] != nil || sb["trafficAccessToken"] != nil {
		t.Errorf("create answer: %v", sb)
	}
	if _, ok := sb["envdAccessToken"]; ok {
		t.Errorf("insecure sandbox has an access token: %v", sb)
	}
	id := sb["sandboxID"].(string)
	e.mu.Lock()
	initBody := e.inits[id]
	e.mu.Unlock()
	if !strings.Contains(initBody, `"X":"1"`) {
		t.Errorf("agent /init got %q", initBody)
	}
	_, data := e.call("GET", "/sandboxes/"+id, nil)
	d := decodeObject(t, data)
	if d["cpuCount"] != 4.0 || d["memoryMB"] != 1024.0 {
		t.Errorf("detail: %v", d)
	}
	if lc, _ := d["lifecycle"].(map[string]any); lc["autoResume"] != true || lc["onTimeout"] != "kill" {
		t.Errorf("lifecycle: %v", d["lifecycle"])
	}
}

func TestCreateSecure(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Domain = "sbx.test" })
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{"/sandboxes", map[string]any{"templateID": "base", "secure": true}},
		{"/v2/sandboxes", map[string]any{"templateID": "base"}},
	} {
		resp, data := e.call("POST", tc.path, tc.body)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("%s: %d %s", tc.path, resp.StatusCode, data)
		}
		sb := decodeObject(t, data)
		tok, _ := sb["envdAccessToken"].(string)
		if tok == "" || sb["domain"] != "sbx.test" {
			t.Errorf("%s: %v", tc.path, sb)
		}
		e.mu.Lock()
		initBody := e.inits[sb["sandboxID"].(string)]
		e.mu.Unlock()
		if !strings.Contains(initBody, tok) {
			t.Errorf("%s: /init did not get the access token: %q", tc.path, initBody)
		}
	}
}

func TestCreateErrors(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		body string
		want int
	}{
		{"empty body", "", http.StatusBadRequest},
		{"bad json", `{"templateID":`, http.StatusBadRequest},
		{"not an object", `[1,2]`, http.StatusBadRequest},
		{"no template", `{"timeout":10}`, http.StatusBadRequest},
		{"template not a string", `{"templateID":5}`, http.StatusBadRequest},
		{"garbage timeout", `{"templateID":"base","timeout":"abc"}`, http.StatusBadRequest},
		{"fractional timeout", `{"templateID":"base","timeout":1.5}`, http.StatusBadRequest},
		{"negative timeout", `{"templateID":"base","timeout":-1}`, http.StatusBadRequest},
		{"huge timeout", `{"templateID":"base","timeout":99999999999}`, http.StatusBadRequest},
		{"metadata not strings", `{"templateID":"base","metadata":{"a":1}}`, http.StatusBadRequest},
		{"negative cpu", `{"templateID":"base","cpuCount":-2}`, http.StatusBadRequest},
		{"autoResume garbage", `{"templateID":"base","autoResume":"yes"}`, http.StatusBadRequest},
		{"unknown template", `{"templateID":"nope"}`, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := e.call("POST", "/sandboxes", tc.body)
			wantError(t, resp, data, tc.want)
		})
	}
	for _, body := range []string{
		`{"templateID":"base","autoResume":true}`,
		`{"templateID":"base","autoResume":{"enabled":false},"unknownField":{"x":1}}`,
		`{"templateID":"base-alias","timeout":0}`,
	} {
		if resp, data := e.call("POST", "/sandboxes", body); resp.StatusCode != http.StatusCreated {
			t.Errorf("%s: %d %s", body, resp.StatusCode, data)
		}
	}
}

func TestGetSandbox(t *testing.T) {
	e := newEnv(t)
	id := e.create(map[string]any{"templateID": "base", "metadata": map[string]string{"k": "v"}})["sandboxID"].(string)
	resp, data := e.call("GET", "/sandboxes/"+id, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("get: %d %s", resp.StatusCode, data)
	}
	d := decodeObject(t, data)
	wantKeys(t, d, "templateID", "alias", "sandboxID", "clientID", "startedAt", "endAt", "cpuCount",
		"memoryMB", "diskSizeMB", "metadata", "state", "envdVersion", "domain", "lifecycle", "allowInternetAccess")
	if d["state"] != "running" || d["sandboxID"] != id || d["metadata"].(map[string]any)["k"] != "v" {
		t.Errorf("detail: %v", d)
	}
	start, err1 := time.Parse(time.RFC3339, d["startedAt"].(string))
	end, err2 := time.Parse(time.RFC3339, d["endAt"].(string))
	if err1 != nil || err2 != nil || end.Sub(start) != 300*time.Second {
		t.Errorf("times %v %v: %v %v", d["startedAt"], d["endAt"], err1, err2)
	}
	resp, data = e.call("GET", "/sandboxes/nosuchsandbox", nil)
	wantError(t, resp, data, http.StatusNotFound)
}

func TestKill(t *testing.T) {
	e := newEnv(t)
	id := e.create(nil)["sandboxID"].(string)
	if resp, data := e.call("DELETE", "/sandboxes/"+id, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("kill: %d %s", resp.StatusCode, data)
	}
	for _, c := range []struct{ method, path, body string }{
		{"DELETE", "/sandboxes/" + id, ""},
		{"GET", "/sandboxes/" + id, ""},
		{"POST", "/sandboxes/" + id + "/timeout", `{"timeout":30}`},
		{"POST", "/sandboxes/" + id + "/refreshes", `{"duration":30}`},
		{"POST", "/sandboxes/" + id + "/connect", `{"timeout":30}`},
		{"GET", "/sandboxes/" + id + "/metrics", ""},
		{"GET", "/v2/sandboxes/" + id + "/logs", ""},
	} {
		resp, data := e.call(c.method, c.path, c.body)
		wantError(t, resp, data, http.StatusNotFound)
	}
}

func TestTimeoutAndRefresh(t *testing.T) {
	e := newEnv(t)
	id := e.create(nil)["sandboxID"].(string)
	endAt := func() time.Time {
		_, data := e.call("GET", "/sandboxes/"+id, nil)
		end, err := time.Parse(time.RFC3339, decodeObject(t, data)["endAt"].(string))
		if err != nil {
			t.Fatal(err)
		}
		return end
	}
	for _, tc := range []struct {
		path, body string
		want       int
		wantLeft   time.Duration // 0: do not check
	}{
		{"timeout", `{"timeout":600}`, http.StatusNoContent, 600 * time.Second},
		{"timeout", `{"timeout":30}`, http.StatusNoContent, 30 * time.Second},
		{"refreshes", `{"duration":10}`, http.StatusNoContent, 30 * time.Second},
		{"refreshes", `{"duration":3600}`, http.StatusNoContent, time.Hour},
		{"refreshes", `{"duration":3601}`, http.StatusBadRequest, 0},
		{"refreshes", `{"duration":-1}`, http.StatusBadRequest, 0},
		{"refreshes", `{"duration":"x"}`, http.StatusBadRequest, 0},
		{"timeout", `{"timeout":-5}`, http.StatusBadRequest, 0},
		{"timeout", `{"timeout":"soon"}`, http.StatusBadRequest, 0},
		{"timeout", `{}`, http.StatusBadRequest, 0},
		{"timeout", `not json`, http.StatusBadRequest, 0},
	} {
		resp, data := e.call("POST", "/sandboxes/"+id+"/"+tc.path, tc.body)
		if tc.want != http.StatusNoContent {
			wantError(t, resp, data, tc.want)
			continue
		}
		if resp.StatusCode != tc.want {
			t.Fatalf("%s %s: %d %s", tc.path, tc.body, resp.StatusCode, data)
		}
		if left := time.Until(endAt()); left > tc.wantLeft+time.Second || left < tc.wantLeft-5*time.Second {
			t.Errorf("%s %s: %s left, want %s", tc.path, tc.body, left, tc.wantLeft)
		}
	}
}

func TestConnect(t *testing.T) {
	e := newEnv(t)
	id := e.create(map[string]any{"templateID": "base", "timeout": 30})["sandboxID"].(string)
	for _, tc := range []struct {
		path, body string
		wantLeft   time.Duration
	}{
		{"/sandboxes/" + id + "/connect", `{"timeout":600}`, 600 * time.Second},
		{"/v2/sandboxes/" + id + "/connect", `{"timeout":60}`, 600 * time.Second}, // never shortens
		{"/v2/sandboxes/" + id + "/connect", ``, 600 * time.Second},
	} {
		resp, data := e.call("POST", tc.path, tc.body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.path, resp.StatusCode, data)
		}
		sb := decodeObject(t, data)
		wantKeys(t, sb, "templateID", "sandboxID", "clientID", "envdVersion", "domain")
		sbx, _ := e.mgr.Get(t.Context(), id)
		if left := time.Until(sbx.EndAt); left > tc.wantLeft+time.Second || left < tc.wantLeft-5*time.Second {
			t.Errorf("%s %s: %s left, want %s", tc.path, tc.body, left, tc.wantLeft)
		}
	}
	resp, data := e.call("POST", "/sandboxes/"+id+"/connect", `{"timeout":-1}`)
	wantError(t, resp, data, http.StatusBadRequest)
	resp, data = e.call("POST", "/v2/sandboxes/nosuch/connect", `{"timeout":10}`)
	wantError(t, resp, data, http.StatusNotFound)
}

func TestListV1(t *testing.T) {
	e := newEnv(t)
	a := e.create(map[string]any{"templateID": "base", "metadata": map[string]string{"team": "x y", "n": "1"}})
	e.create(map[string]any{"templateID": "base", "metadata": map[string]string{"team": "z"}})
	resp, data := e.call("GET", "/sandboxes", nil)
	if resp.StatusCode != http.StatusOK || len(decodeArray(t, data)) != 2 {
		t.Fatalf("list: %d %s", resp.StatusCode, data)
	}
	q := url.Values{"metadata": {url.Values{url.QueryEscape("team"): {url.QueryEscape("x y")}}.Encode()}}
	_, data = e.call("GET", "/sandboxes?"+q.Encode(), nil)
	list := decodeArray(t, data)
	if len(list) != 1 || list[0]["sandboxID"] != a["sandboxID"] {
		t.Fatalf("metadata filter: %s", data)
	}
	wantKeys(t, list[0], "templateID", "sandboxID", "clientID", "startedAt", "endAt", "cpuCount",
		"memoryMB", "diskSizeMB", "metadata", "state", "envdVersion")
}

func TestListV2Paging(t *testing.T) {
	e := newEnv(t)
	var group []string
	for i := range 5 {
		md := map[string]string{"i": fmt.Sprint(i)}
		if i%2 == 0 {
			md["group"] = "even"
		}
		sb := e.create(map[string]any{"templateID": "base", "metadata": md})
		if i%2 == 0 {
			group = append(group, sb["sandboxID"].(string))
		}
	}
	pages, seen := e.listAllPages(url.Values{"limit": {"2"}, "state": {"running,paused"}})
	if pages != 3 || len(seen) != 5 {
		t.Errorf("pages %d, sandboxes %v", pages, seen)
	}
	q := url.Values{"metadata": {"group=even"}, "state": {"running", "paused"}}
	_, data := e.call("GET", "/v2/sandboxes?"+q.Encode(), nil)
	list := decodeArray(t, data)
	if len(list) != len(group) {
		t.Fatalf("metadata filter: %s", data)
	}
	slices.Reverse(group) // newest first by default
	for i, sb := range list {
		if sb["sandboxID"] != group[i] {
			t.Errorf("metadata filter [%d] = %v, want %s", i, sb["sandboxID"], group[i])
		}
	}
	if _, data = e.call("GET", "/v2/sandboxes?state=paused", nil); len(decodeArray(t, data)) != 0 {
		t.Errorf("paused listing: %s", data)
	}
	for _, bad := range []string{"limit=0", "limit=101", "limit=x", "state=bogus", "nextToken=abc"} {
		resp, data := e.call("GET", "/v2/sandboxes?"+bad, nil)
		wantError(t, resp, data, http.StatusBadRequest)
	}
}

// listAllPages follows X-Next-Token through GET /v2/sandboxes and returns
// the number of pages and the ids seen.
func (e *env) listAllPages(q url.Values) (pages int, ids []string) {
	e.t.Helper()
	for {
		resp, data := e.call("GET", "/v2/sandboxes?"+q.Encode(), nil)
		if resp.StatusCode != http.StatusOK {
			e.t.Fatalf("page: %d %s", resp.StatusCode, data)
		}
		pages++
		for _, sb := range decodeArray(e.t, data) {
			ids = append(ids, sb["sandboxID"].(string))
		}
		token := resp.Header.Get("X-Next-Token")
		if token == "" {
			return pages, ids
		}
		q.Set("nextToken", token)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	id := e.create(nil)["sandboxID"].(string)
	now := time.Now().Unix()
	resp, data := e.call("GET", fmt.Sprintf("/sandboxes/%s/metrics?start=%d&end=%d", id, now-60, now+60), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: %d %s", resp.StatusCode, data)
	}
	ms := decodeArray(t, data)
	if len(ms) != 1 {
		t.Fatalf("metrics: %s", data)
	}
	wantKeys(t, ms[0], "timestamp", "timestampUnix", "cpuCount", "cpuUsedPct", "memUsed", "memTotal", "memCache", "diskUsed", "diskTotal")
	if ms[0]["memTotal"] != float64(512<<20) || ms[0]["cpuCount"] != 2.0 {
		t.Errorf("metric: %v", ms[0])
	}
	_, data = e.call("GET", "/sandboxes/metrics?sandbox_ids="+id+",nosuch", nil)
	many := decodeObject(t, data)["sandboxes"].(map[string]any)
	if _, ok := many[id]; !ok || len(many) != 1 {
		t.Errorf("metrics of many: %s", data)
	}
	resp, data = e.call("GET", "/sandboxes/metrics", nil)
	wantError(t, resp, data, http.StatusBadRequest)
}

func TestUnknownRoutes(t *testing.T) {
	e := newEnv(t)
	resp, data := e.call("GET", "/no/such/route", nil)
	wantError(t, resp, data, http.StatusNotFound)
	// A create naming a volume that does not exist is refused, not
	// started without it.
	resp, data = e.call("POST", "/v2/sandboxes", map[string]any{"templateID": "base", "volumeMounts": []any{map[string]string{"name": "v", "path": "/data"}}})
	wantError(t, resp, data, http.StatusBadRequest)
}

func TestRecoverPanics(t *testing.T) {
	e := newEnv(t)
	h := e.s.logRequests(e.s.recoverPanics(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("bug")
	})))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
	wantError(t, rec.Result(), rec.Body.Bytes(), http.StatusInternalServerError)
}
