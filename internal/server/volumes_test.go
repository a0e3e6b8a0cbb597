package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// contentCall sends a content-API request with the volume's bearer token.
func (e *env) contentCall(method, path, token string, body io.Reader) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

func TestVolumesControlAPI(t *testing.T) {
	e := newEnv(t)
	resp, data := e.call("POST", "/volumes", map[string]string{"name": "data"})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, data)
	}
	var v volumeTokenJSON
	json.Unmarshal(data, &v)
	if v.VolumeID == "" || v.Name != "data" || len(v.Token) < 32 {
		t.Fatalf("created %s", data)
	}
	resp, data = e.call("POST", "/volumes", map[string]string{"name": "data"})
	wantError(t, resp, data, http.StatusConflict)
	resp, data = e.call("POST", "/volumes", map[string]string{"name": "../x"})
	wantError(t, resp, data, http.StatusBadRequest)
	_, data = e.call("GET", "/volumes", nil)
	if !strings.Contains(string(data), `"volumeID":"`+v.VolumeID+`"`) || strings.Contains(string(data), v.Token) {
		t.Errorf("list (no tokens): %s", data)
	}
	resp, data = e.call("GET", "/volumes/"+v.VolumeID, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), v.Token) {
		t.Errorf("get: %d %s", resp.StatusCode, data)
	}
	resp, data = e.call("GET", "/volumes/nosuch", nil)
	wantError(t, resp, data, http.StatusNotFound)
	resp, _ = e.call("DELETE", "/volumes/"+v.VolumeID, nil)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	resp, data = e.call("DELETE", "/volumes/"+v.VolumeID, nil)
	wantError(t, resp, data, http.StatusNotFound)
}

func TestVolumeContentAPI(t *testing.T) {
	e := newEnv(t)
	_, data := e.call("POST", "/volumes", map[string]string{"name": "files"})
	var v volumeTokenJSON
	json.Unmarshal(data, &v)
	t.Cleanup(func() { e.call("DELETE", "/volumes/"+v.VolumeID, nil) })
	base := "/volumecontent/" + v.VolumeID
	resp, data := e.contentCall("PUT", base+"/file?path=/dir/a.txt&mode=416", v.Token, strings.NewReader("hello"))
	if resp.StatusCode/100 != 2 || !strings.Contains(string(data), `"mode":416`) || !strings.Contains(string(data), `"uid":1000`) {
		t.Fatalf("write: %d %s", resp.StatusCode, data)
	}
	resp, data = e.contentCall("GET", base+"/file?path=dir/a.txt", v.Token, nil)
	if resp.StatusCode != http.StatusOK || string(data) != "hello" {
		t.Errorf("read: %d %q", resp.StatusCode, data)
	}
	resp, data = e.contentCall("GET", base+"/dir?path=/&depth=2", v.Token, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"path":"/dir/a.txt"`) {
		t.Errorf("list: %d %s", resp.StatusCode, data)
	}
	resp, data = e.contentCall("PATCH", base+"/path?path=/dir/a.txt", v.Token, strings.NewReader(`{"uid":0,"gid":0}`))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"uid":0`) {
		t.Errorf("update: %d %s", resp.StatusCode, data)
	}
	for _, c := range []struct {
		method, path, token string
		body                io.Reader
		want                int
	}{
		{"GET", base + "/path?path=/nosuch", v.Token, nil, http.StatusNotFound},
		{"GET", base + "/file?path=../../etc/passwd", v.Token, nil, http.StatusBadRequest},
		{"GET", base + "/dir?path=/", "wrong", nil, http.StatusUnauthorized},
		{"GET", "/volumecontent/nosuch/dir?path=/", v.Token, nil, http.StatusNotFound},
		{"PUT", base + "/file?path=/big", v.Token, bytes.NewReader(make([]byte, 9<<20)), http.StatusInsufficientStorage},
		{"POST", base + "/dir?path=/x/y", v.Token, nil, http.StatusNotFound},
	} {
		resp, data := e.contentCall(c.method, c.path, c.token, c.body)
		if resp.StatusCode != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, resp.StatusCode, data, c.want)
		}
	}
	// The write past the limit left its partial file, as a full disk does:
	// until it goes the volume is full, and whether a directory still fits
	// depends on the filesystem's last free blocks (in 1 of 40 runs it did
	// not).
	if resp, data := e.contentCall("DELETE", base+"/path?path=/big", v.Token, nil); resp.StatusCode/100 != 2 {
		t.Errorf("remove the partial /big: %d %s", resp.StatusCode, data)
	}
	resp, _ = e.contentCall("POST", base+"/dir?path=/x/y&force=true", v.Token, nil)
	if resp.StatusCode/100 != 2 {
		t.Errorf("makeDir force: %d", resp.StatusCode)
	}
	// The SDK's default content URL is https://api.<domain>: that host
	// reaches the content API, not the data plane.
	req, _ := http.NewRequest("GET", e.srv.URL+base+"/file?path=/dir/a.txt", nil)
	req.Host = "api.sandboxes.test"
	req.Header.Set("Authorization", "Bearer "+v.Token)
	if r2, err := http.DefaultClient.Do(req); err != nil || r2.StatusCode != http.StatusOK {
		t.Errorf("read through Host api.<domain>: %v %v", r2, err)
	} else {
		r2.Body.Close()
	}
	resp, _ = e.contentCall("DELETE", base+"/path?path=/dir", v.Token, nil)
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("remove: %d", resp.StatusCode)
	}
}

func TestVolumeMountsAtCreate(t *testing.T) {
	e := newEnv(t)
	_, data := e.call("POST", "/volumes", map[string]string{"name": "shared"})
	var v volumeTokenJSON
	json.Unmarshal(data, &v)
	resp, data := e.call("POST", "/v2/sandboxes", map[string]any{"templateID": "base",
		"volumeMounts": []any{map[string]string{"name": "shared", "path": "/mnt/data"}}})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create with a volume: %d %s", resp.StatusCode, data)
	}
	id := decodeObject(t, data)["sandboxID"].(string)
	_, data = e.call("GET", "/sandboxes/"+id, nil)
	if !strings.Contains(string(data), `"volumeMounts":[{"name":"shared","path":"/mnt/data"}]`) {
		t.Errorf("get: %s", data)
	}
	resp, data = e.call("DELETE", "/volumes/"+v.VolumeID, nil)
	wantError(t, resp, data, http.StatusConflict)
	for _, bad := range []map[string]string{
		{"name": "shared", "path": "relative"}, {"name": "shared", "path": "/proc/x"},
		{"name": "shared", "path": "/"}, {"name": "nosuch", "path": "/data"},
	} {
		resp, data := e.call("POST", "/v2/sandboxes", map[string]any{"templateID": "base", "volumeMounts": []any{bad}})
		wantError(t, resp, data, http.StatusBadRequest)
	}
	if resp, _ := e.call("DELETE", "/sandboxes/"+id, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("kill: %d", resp.StatusCode)
	}
	if resp, data := e.call("DELETE", "/volumes/"+v.VolumeID, nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("delete after the kill: %d %s", resp.StatusCode, data)
	}
}
