package clienttest

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/forkbox/forkbox/internal/fsdiff"
)

// Files implements fake.FileLister: the runtime's upper layer of this
// sandbox (what diffs read) is the agent's files.
func (a *agent) Files() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]string, len(a.files))
	for p, b := range a.files {
		out[p] = string(b)
	}
	return out
}

// apply is the agent's POST /forkbox/apply over its in-memory files: the
// change set is read whole, then applied under the lock (all or nothing).
func (a *agent) apply(w http.ResponseWriter, r *http.Request) {
	type put struct {
		path string
		body []byte
		dir  bool
	}
	var dels []string
	var puts []put
	tr := tar.NewReader(r.Body)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		p, ok := fsdiff.CleanPath(hdr.Name)
		if err != nil || !ok {
			writeError(w, http.StatusBadRequest, "bad change set")
			return
		}
		switch {
		case fsdiff.IsWhiteout(hdr):
			dels = append(dels, p)
		case hdr.Typeflag == tar.TypeDir:
			puts = append(puts, put{path: p, dir: true})
		default:
			b, _ := io.ReadAll(tr)
			puts = append(puts, put{path: p, body: b})
		}
	}
	a.mu.Lock()
	for _, p := range dels {
		for k := range a.files {
			if k == p || k == p+"/" || strings.HasPrefix(k, p+"/") {
				delete(a.files, k)
			}
		}
	}
	for _, p := range puts {
		if p.dir {
			a.files[p.path+"/"] = nil
		} else {
			a.files[p.path] = p.body
		}
	}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]int{"applied": len(dels) + len(puts)})
}
