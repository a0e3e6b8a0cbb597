package server

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestListV2OrderAndFilters(t *testing.T) {
	e := newEnv(t)
	var ids []string
	var mid time.Time
	for i := range 4 {
		if i == 2 {
			time.Sleep(20 * time.Millisecond)
			mid = time.Now()
		}
		ids = append(ids, e.create(map[string]any{"templateID": "base", "metadata": map[string]string{"k": "v w", "i": string(rune('0' + i))}})["sandboxID"].(string))
	}
	newest := slices.Clone(ids)
	slices.Reverse(newest)
	for _, tc := range []struct {
		name string
		q    url.Values
		want []string
	}{
		{"default newest first", url.Values{}, newest},
		{"desc", url.Values{"order": {"desc"}}, newest},
		{"asc", url.Values{"order": {"asc"}}, ids},
		{"startedAfter inclusive", url.Values{"order": {"asc"}, "startedAfter": {mid.UTC().Format(time.RFC3339Nano)}}, ids[2:]},
		{"template id", url.Values{"template": {"base"}}, newest},
		{"template name", url.Values{"template": {"base-alias"}}, newest},
		{"unknown template", url.Values{"template": {"nosuch"}}, nil},
		{"metadata", url.Values{"metadata": {url.QueryEscape("k") + "=" + url.QueryEscape("v w") + "&i=1"}}, ids[1:2]},
		{"state comma separated", url.Values{"state": {"paused,running"}}, newest},
		{"state paused", url.Values{"state": {"paused"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := e.listIDs(tc.q.Encode()); !slices.Equal(got, tc.want) {
				t.Errorf("listed %v, want %v", got, tc.want)
			}
		})
	}
	resp, data := e.call("GET", "/v2/sandboxes?state=paused", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Total-Running") != "4" {
		t.Errorf("X-Total-Running %q (%d %s)", resp.Header.Get("X-Total-Running"), resp.StatusCode, data)
	}
	for _, bad := range []string{"order=up", "startedAfter=yesterday"} {
		resp, data := e.call("GET", "/v2/sandboxes?"+bad, nil)
		wantError(t, resp, data, http.StatusBadRequest)
	}
}

// Pages are positions, not offsets: sandboxes created or killed between
// two pages neither repeat nor hide the others.
func TestListV2StablePaging(t *testing.T) {
	for _, order := range []string{"desc", "asc"} {
		t.Run(order, func(t *testing.T) {
			e := newEnv(t)
			var ids []string
			for range 6 {
				ids = append(ids, e.create(nil)["sandboxID"].(string))
			}
			if order == "desc" {
				slices.Reverse(ids)
			}
			q := url.Values{"limit": {"2"}, "order": {order}}
			var seen []string
			for page := 0; ; page++ {
				resp, data := e.call("GET", "/v2/sandboxes?"+q.Encode(), nil)
				for _, sb := range decodeArray(t, data) {
					seen = append(seen, sb["sandboxID"].(string))
				}
				tok := resp.Header.Get("X-Next-Token")
				if tok == "" {
					break
				}
				q.Set("nextToken", tok)
				if page == 0 {
					// Between pages: one new sandbox, and one already seen
					// and one not yet seen killed.
					e.create(nil)
					for _, id := range []string{ids[0], ids[4]} {
						if resp, data := e.call("DELETE", "/sandboxes/"+id, nil); resp.StatusCode != http.StatusNoContent {
							t.Fatalf("kill: %d %s", resp.StatusCode, data)
						}
					}
				}
			}
			want := []string{ids[0], ids[1], ids[2], ids[3], ids[5]}
			if order == "asc" {
				// The new sandbox is after every old one.
				if len(seen) != 6 || !slices.Equal(seen[:5], want) {
					t.Errorf("seen %v, want %v + the new one", seen, want)
				}
			} else if !slices.Equal(seen, want) {
				t.Errorf("seen %v, want %v", seen, want)
			}
		})
	}
}

// Snapshot pages are positions too: one taken or deleted between two
// pages moves nothing.
func TestSnapshotsStablePaging(t *testing.T) {
	e := newEnv(t)
	id := e.create(nil)["sandboxID"].(string)
	var snaps []string
	for range 4 {
		snaps = append(snaps, e.snapshot(id, nil)["snapshotID"].(string))
		time.Sleep(2 * time.Millisecond)
	}
	slices.Reverse(snaps)
	q := url.Values{"limit": {"2"}, "sandboxID": {id}}
	var seen []string
	for page := 0; ; page++ {
		resp, data := e.call("GET", "/snapshots?"+q.Encode(), nil)
		for _, s := range decodeArray(t, data) {
			seen = append(seen, s["snapshotID"].(string))
		}
		tok := resp.Header.Get("X-Next-Token")
		if tok == "" {
			break
		}
		q.Set("nextToken", tok)
		if page == 0 {
			e.snapshot(id, nil)
			if resp, data := e.call("DELETE", "/templates/"+snaps[0], nil); resp.StatusCode != http.StatusNoContent {
				t.Fatalf("delete: %d %s", resp.StatusCode, data)
			}
		}
	}
	if !slices.Equal(seen, snaps) {
		t.Errorf("seen %v, want %v", seen, snaps)
	}
}

func TestMetricsRange(t *testing.T) {
	e := newEnv(t)
	id := e.create(nil)["sandboxID"].(string)
	now := time.Now().Unix()
	for _, tc := range []struct {
		name  string
		query string
		want  int
	}{
		{"no range", "", 1},
		{"around now", fmt.Sprintf("start=%d&end=%d", now-5, now+5), 1},
		{"open end", fmt.Sprintf("start=%d", now-5), 1},
		{"before the sandbox existed", fmt.Sprintf("start=%d&end=%d", now-3600, now-600), 0},
		{"in the future", fmt.Sprintf("start=%d", now+600), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := e.call("GET", "/sandboxes/"+id+"/metrics?"+tc.query, nil)
			if resp.StatusCode != http.StatusOK || len(decodeArray(t, data)) != tc.want {
				t.Errorf("%d %s, want %d readings", resp.StatusCode, data, tc.want)
			}
		})
	}
	for _, bad := range []string{"start=x", "end=-1", fmt.Sprintf("start=%d&end=%d", now, now-1)} {
		resp, data := e.call("GET", "/sandboxes/"+id+"/metrics?"+bad, nil)
		wantError(t, resp, data, http.StatusBadRequest)
	}
	ids := []string{id}
	for range 100 {
		ids = append(ids, "x")
	}
	resp, data := e.call("GET", "/sandboxes/metrics?sandbox_ids="+strings.Join(ids, ","), nil)
	wantError(t, resp, data, http.StatusBadRequest)
}
