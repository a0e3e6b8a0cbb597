package agent

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// accessTokenHeader carries the sandbox's envd access token.
const accessTokenHeader = "X-Access-Token"

// withAuth enforces the access token once /init (or Config) has set one.
// /health stays open so the daemon can probe readiness without secrets;
// /files also accepts a signed URL so the SDK can hand out download and
// upload links that work without the header.
func (a *Agent) withAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.state.token() == "" || r.URL.Path == "/health" {
			next.ServeHTTP(w, r)
			return
		}
		if hdr := r.Header.Get(accessTokenHeader); hdr != "" || r.URL.Path != "/files" {
			if !a.state.tokenMatches(hdr) {
				writeJSONError(w, http.StatusUnauthorized, errors.New("missing or invalid access token"))
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if err := a.checkFileSignature(r, time.Now()); err != nil {
			writeJSONError(w, http.StatusUnauthorized, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkFileSignature validates the signature query parameters of a /files
// request. The SDK signs "path:operation:username:token[:expiration]" with
// SHA-256, base64 without padding, prefixed "v1_"; username is empty when
// the request names none.
func (a *Agent) checkFileSignature(r *http.Request, now time.Time) error {
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" {
		return errors.New("missing access token or signature")
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	var exp *int64
	if raw := q.Get("signature_expiration"); raw != "" {
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return errors.New("invalid signature_expiration")
		}
		exp = &v
	}
	want := fileSignature(q.Get("path"), op, q.Get("username"), a.state.token(), exp)
	if subtle.ConstantTimeCompare([]byte(want), []byte(sig)) != 1 {
		return errors.New("invalid signature")
	}
	if exp != nil && *exp < now.Unix() {
		return errors.New("signature has expired")
	}
	return nil
}

// fileSignature computes the envd v1 signature of a file URL.
func fileSignature(path, op, username, token string, exp *int64) string {
	raw := path + ":" + op + ":" + username + ":" + token
	if exp != nil {
		raw += ":" + strconv.FormatInt(*exp, 10)
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// withCORS lets browser clients (connect-web) call the agent directly. It
// answers preflight requests itself because they never carry the token.
func (a *Agent) withCORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Set("Access-Control-Expose-Headers", "*")
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "*")
			h.Set("Access-Control-Max-Age", "7200")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}
