package server

import (
	"net/http"
	"testing"
)

func TestCreateAutoPauseMemory(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		body map[string]any
		want int
	}{
		{"files only", map[string]any{"templateID": "base", "autoPause": true, "autoPauseMemory": false}, http.StatusCreated},
		{"with memory", map[string]any{"templateID": "base", "autoPause": true, "autoPauseMemory": true}, http.StatusCreated},
		{"files only with auto-resume", map[string]any{"templateID": "base", "autoPause": true, "autoPauseMemory": false, "autoResume": map[string]bool{"enabled": true}}, http.StatusBadRequest},
		{"files only without autoPause", map[string]any{"templateID": "base", "autoPauseMemory": false}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := e.call("POST", "/v2/sandboxes", tc.body)
			if resp.StatusCode != tc.want {
				t.Fatalf("%d %s, want %d", resp.StatusCode, data, tc.want)
			}
			if tc.want != http.StatusCreated {
				return
			}
			id := decodeObject(t, data)["sandboxID"].(string)
			_, data = e.call("GET", "/sandboxes/"+id, nil)
			lc := decodeObject(t, data)["lifecycle"].(map[string]any)
			if lc["onTimeout"] != "pause" || lc["autoResume"] != false {
				t.Errorf("lifecycle %v", lc)
			}
			sb, _ := e.mgr.Get(t.Context(), id)
			if files := tc.body["autoPauseMemory"] == false; sb.AutoPauseFilesOnly != files {
				t.Errorf("AutoPauseFilesOnly = %v", sb.AutoPauseFilesOnly)
			}
		})
	}
	// pause {memory: false}: paused keeping only the files; traffic does
	// not resume it even with auto-resume; connect cold-boots it.
	id := e.create(map[string]any{"templateID": "base", "autoResume": map[string]bool{"enabled": true}})["sandboxID"].(string)
	if resp, data := e.call("POST", "/sandboxes/"+id+"/pause", `{"memory":false}`); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("pause files only: %d %s", resp.StatusCode, data)
	}
	if err := e.mgr.WaitIdle(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if sb, _ := e.mgr.Get(t.Context(), id); !sb.FilesOnly {
		t.Fatalf("not paused files-only: %+v", sb)
	}
	resp, data := e.envdCall(id)
	if got := decodeObject(t, data); resp.StatusCode != http.StatusBadGateway || got["canAutoResume"] != false {
		t.Errorf("data plane of a files-only pause: %d %s", resp.StatusCode, data)
	}
	if resp, data := e.call("POST", "/v2/sandboxes/"+id+"/connect", `{"timeout":60}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("connect: %d %s", resp.StatusCode, data)
	}
	e.pauseOK(id)
	if err := e.mgr.WaitIdle(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if resp, data := e.call("POST", "/v2/sandboxes/"+id+"/connect", `{"timeout":60,"memory":false}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("reboot connect: %d %s", resp.StatusCode, data)
	}
}
