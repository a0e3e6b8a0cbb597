package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/secrets"
	"github.com/forkbox/forkbox/internal/store"
)

// withVault gives the server a vault over a database of its own.
func withVault(t *testing.T) func(*Config) {
	return func(c *Config) {
		st, err := store.OpenPath(context.Background(), ":memory:")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		v, err := secrets.New(st, make([]byte, 32), c.Logger, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Secrets = v
	}
}

// TestSecretsAPI walks E2B's Secret routes as the SDK calls them: create
// (201, version 1), get by id and by name, update by POST and PATCH
// (version +1), paging with X-Next-Token, delete (204, then 404), and no
// answer ever carries the value.
func TestSecretsAPI(t *testing.T) {
	e := newEnv(t, withVault(t))
	const value = "tok-abcdefghijkl"
	resp, data := e.call("POST", "/secrets", map[string]any{"name": "GitHub-Token", "value": value, "metadata": map[string]string{"k": "v"}})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, data)
	}
	sec := decodeObject(t, data)
	wantKeys(t, sec, "secretID", "name", "currentVersion", "metadata", "createdAt", "updatedAt")
	id := sec["secretID"].(string)
	if sec["name"] != "github-token" || sec["currentVersion"] != 1.0 || !strings.HasPrefix(id, "sec_") {
		t.Fatalf("created %s", data)
	}
	var bodies []string
	check := func(method, path string, body any, status int) map[string]any {
		t.Helper()
		resp, data := e.call(method, path, body)
		bodies = append(bodies, string(data))
		if resp.StatusCode != status {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, data, status)
		}
		if status >= 300 || len(data) == 0 || data[0] != '{' {
			return nil
		}
		return decodeObject(t, data)
	}
	check("GET", "/secrets/"+id, nil, http.StatusOK)
	if got := check("GET", "/secrets/github-token", nil, http.StatusOK); got["secretID"] != id {
		t.Fatalf("get by name: %v", got)
	}
	if got := check("POST", "/secrets/"+id, map[string]any{"value": value + "2"}, http.StatusOK); got["currentVersion"] != 2.0 || got["metadata"].(map[string]any)["k"] != "v" {
		t.Fatalf("update: %v", got)
	}
	if got := check("PATCH", "/secrets/github-token", map[string]any{"value": value + "3", "metadata": map[string]string{}}, http.StatusOK); got["currentVersion"] != 3.0 {
		t.Fatalf("patch: %v", got)
	}
	check("POST", "/secrets", map[string]any{"name": "github-token", "value": "x"}, http.StatusConflict)
	check("POST", "/secrets", map[string]any{"name": "bad{name", "value": "x"}, http.StatusBadRequest)
	check("POST", "/secrets", map[string]any{"name": "novalue"}, http.StatusBadRequest)
	check("POST", "/secrets/nosuch", map[string]any{"value": "x"}, http.StatusNotFound)
	check("GET", "/secrets/nosuch", nil, http.StatusNotFound)
	check("GET", "/secrets?limit=0", nil, http.StatusBadRequest)
	for _, n := range []string{"b", "c"} {
		check("POST", "/secrets", map[string]any{"name": n, "value": value}, http.StatusCreated)
	}
	resp, data = e.call("GET", "/secrets?limit=2", nil)
	page := decodeArray(t, data)
	next := resp.Header.Get("X-Next-Token")
	if len(page) != 2 || next == "" || page[0]["name"] != "github-token" {
		t.Fatalf("page 1: %s (next %q)", data, next)
	}
	resp, data = e.call("GET", "/secrets?limit=2&nextToken="+next, nil)
	if page := decodeArray(t, data); len(page) != 1 || page[0]["name"] != "c" || resp.Header.Get("X-Next-Token") != "" {
		t.Fatalf("page 2: %s", data)
	}
	bodies = append(bodies, string(data))
	if resp, _ := e.call("DELETE", "/secrets/"+id, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	check("DELETE", "/secrets/"+id, nil, http.StatusNotFound)
	check("GET", "/secrets/github-token", nil, http.StatusNotFound)
	for _, b := range bodies {
		if strings.Contains(b, value) {
			t.Fatalf("an answer carries the value: %s", b)
		}
	}
}

// TestSecretsWithoutVault: a server without secrets says so (501).
func TestSecretsWithoutVault(t *testing.T) {
	e := newEnv(t)
	resp, data := e.call("GET", "/secrets", nil)
	wantError(t, resp, data, http.StatusNotImplemented)
}

// TestWellKnownWithoutKey: the OIDC issuer's documents need no API key;
// the rest of the API still does.
func TestWellKnownWithoutKey(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Identity = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"path": r.URL.Path})
		})
	})
	resp, err := http.Get(e.srv.URL + "/.well-known/openid-configuration")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("discovery without a key: %v %v", resp, err)
	}
	resp.Body.Close()
	if resp, err := http.Get(e.srv.URL + "/secrets"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/secrets without a key: %v %v", resp, err)
	}
}
