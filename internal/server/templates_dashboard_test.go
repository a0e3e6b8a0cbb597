package server

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"
	"time"
)

// TestTemplatesViewData checks that every field the dashboard's templates
// view (web/static/templates.js) reads of a template, a build and a log
// entry is in the API's answers: the names are taken from the script
// itself (t.x and tpl.x of a template, b.x of a build, e.x of a log
// entry, st.x and r.x of a status answer), so a renamed field fails here.
func TestTemplatesViewData(t *testing.T) {
	src, err := os.ReadFile("../../web/static/templates.js")
	if err != nil {
		t.Fatal(err)
	}
	e := newTemplateEnv(t)
	_, body := e.call("POST", "/v3/templates", map[string]any{"name": "viewed"})
	var created struct{ TemplateID, BuildID string }
	json.Unmarshal(body, &created)
	bpath := "/templates/" + created.TemplateID + "/builds/" + created.BuildID
	e.call("POST", "/v2"+bpath, map[string]any{"fromTemplate": "no-such-template"})
	var status map[string]any
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, body = e.call("GET", bpath+"/status?limit=100&logsOffset=0", nil)
		status = nil
		json.Unmarshal(body, &status)
		if status["status"] == "error" {
			break
		}
	}
	var list []map[string]any
	_, body = e.call("GET", "/templates", nil)
	json.Unmarshal(body, &list)
	var tpl map[string]any
	_, body = e.call("GET", "/templates/"+created.TemplateID, nil)
	json.Unmarshal(body, &tpl)
	builds, _ := tpl["builds"].([]any)
	entries, _ := status["logEntries"].([]any)
	if len(list) == 0 || len(builds) == 0 || len(entries) == 0 {
		t.Fatalf("no data to check: list %d, builds %d, log entries %d", len(list), len(builds), len(entries))
	}
	reason, _ := status["reason"].(map[string]any)
	objects := map[string]map[string]any{
		"t": list[len(list)-1], "b": builds[0].(map[string]any), "e": entries[0].(map[string]any),
		"tpl": tpl, "st": status, "r": status, "reason": reason,
	}
	seen := 0
	for _, m := range regexp.MustCompile(`\b(t|b|e|st|r|reason)\.([a-zA-Z]+)\b`).FindAllStringSubmatch(string(src), -1) {
		obj, field := m[1], m[2]
		if obj == "e" && field == "key" {
			continue // a keydown event's key
		}
		if _, ok := objects[obj][field]; !ok {
			t.Errorf("templates.js reads %s.%s; the API's answer has no %q: %v", obj, field, field, objects[obj])
		}
		seen++
	}
	if seen < 10 {
		t.Errorf("found only %d field reads in templates.js", seen)
	}
}
