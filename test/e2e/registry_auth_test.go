package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"golang.org/x/crypto/bcrypt"
)

// htpasswdAuth guards a registry with HTTP basic authentication against an
// htpasswd file of bcrypt hashes, as Docker's registry (auth: htpasswd)
// does: 401 with a Basic challenge and the registry's error body.
type htpasswdAuth struct {
	users map[string][]byte
	next  http.Handler
}

func (h *htpasswdAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if u, p, ok := r.BasicAuth(); ok && h.users[u] != nil && bcrypt.CompareHashAndPassword(h.users[u], []byte(p)) == nil {
		h.next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="forkbox-e2e"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": "UNAUTHORIZED", "message": "authentication required"}}})
}

// readHtpasswd parses user:bcrypt-hash lines.
func readHtpasswd(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	users := map[string][]byte{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if u, hash, ok := strings.Cut(sc.Text(), ":"); ok {
			users[u] = []byte(hash)
		}
	}
	return users
}

// startAuthRegistry starts a loopback registry that wants user:pass (an
// htpasswd file written for it) and returns its host.
func startAuthRegistry(t *testing.T, user, pass string) string {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(file, []byte(fmt.Sprintf("%s:%s\n", user, hash)), 0o600); err != nil {
		t.Fatal(err)
	}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(&htpasswdAuth{users: readHtpasswd(t, file), next: inner})
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}
