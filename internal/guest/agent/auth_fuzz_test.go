package agent

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// envdSignature is the E2B SDK's signature of a file URL, computed here
// independently of the agent's code: "v1_" + unpadded base64 of the SHA-256
// of "path:operation:username:token[:expiration]".
func envdSignature(path, op, user, token string, exp *int64) string {
	raw := path + ":" + op + ":" + user + ":" + token
	if exp != nil {
		raw += ":" + strconv.FormatInt(*exp, 10)
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// FuzzSignedURL checks signed /files URLs two ways. An arbitrary query is
// accepted only if it carries the SDK's signature of its own path,
// operation, username and unexpired expiry. A URL signed by the SDK's rule
// for fuzzed values is accepted exactly when it has not expired, and
// rejected once any parameter changes.
func FuzzSignedURL(f *testing.F) {
	const token = "tok"
	now := time.Unix(1_800_000_000, 0)
	good := url.Values{"path": {"/tmp/a"}, "signature": {envdSignature("/tmp/a", "read", "", token, nil)}}
	f.Add(good.Encode(), false, "/tmp/a", "user", int64(0), false)
	f.Add("path=/x&signature=v1_abc&signature_expiration=1", true, "/home/user/f", "root", now.Unix()+60, true)
	f.Add("signature=&username=%zz", false, "", "", now.Unix()-1, true)
	f.Add("path=a:b&signature_expiration=-9223372036854775808&signature=v1_", true, "a:b", "u:v", int64(-1), true)
	a := New(Config{AccessToken: token})
	f.Fuzz(func(t *testing.T, query string, write bool, path, user string, exp int64, hasExp bool) {
		method, op := "GET", "read"
		if write {
			method, op = "POST", "write"
		}
		r := httptest.NewRequest(method, "/files", nil)
		r.URL.RawQuery = query
		if err := a.checkFileSignature(r, now); err == nil {
			q := r.URL.Query()
			var e *int64
			if raw := q.Get("signature_expiration"); raw != "" {
				v, perr := strconv.ParseInt(raw, 10, 64)
				if perr != nil || v < now.Unix() {
					t.Fatalf("query %q accepted with expiration %q", query, raw)
				}
				e = &v
			}
			if q.Get("signature") != envdSignature(q.Get("path"), op, q.Get("username"), token, e) {
				t.Fatalf("query %q accepted without its signature", query)
			}
		}

		var e *int64
		v := url.Values{"path": {path}}
		if user != "" {
			v.Set("username", user)
		}
		if hasExp {
			e = &exp
			v.Set("signature_expiration", strconv.FormatInt(exp, 10))
		}
		v.Set("signature", envdSignature(path, op, user, token, e))
		r = httptest.NewRequest(method, "/files", nil)
		r.URL.RawQuery = v.Encode()
		err := a.checkFileSignature(r, now)
		if expired := hasExp && exp < now.Unix(); (err == nil) == expired {
			t.Fatalf("signed %v (expired %v): %v", v, expired, err)
		}
		v.Set("path", path+"x")
		r.URL.RawQuery = v.Encode()
		if err := a.checkFileSignature(r, now); err == nil {
			t.Fatalf("signature of %q accepted for %q", path, path+"x")
		}
	})
}
