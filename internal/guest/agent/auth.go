package agent

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// accessTokenHeader carries the sandbox's envd access token.
const accessTokenHeader = "X-Access-Token"

// The 401 messages are envd's, word for word: clients and their tests
// match on them.
var (
	errNoToken          = errors.New("unauthorized access, please provide a valid access token or method signing if supported")
	errHeaderMismatch   = errors.New("access token present in header but does not match")
	errNoSignature      = errors.New("missing signature query parameter")
	errBadSignature     = errors.New("invalid signature")
	errExpiredSignature = errors.New("signature is already expired")
)

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
		if r.URL.Path != "/files" {
			if !a.state.tokenMatches(r.Header.Get(accessTokenHeader)) {
				writeJSONError(w, http.StatusUnauthorized, errNoToken)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if err := a.checkFileSignature(r, time.Now()); err != nil {
			status := http.StatusUnauthorized
			if errors.Is(err, errBadRequest) {
				status = http.StatusBadRequest
			}
			writeJSONError(w, status, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkFileSignature authorizes a /files request as envd does: a token in the
// header must match; without one, the signature query parameters must. The
// SDK signs "path:operation:username:token[:expiration]" with SHA-256,
// base64 without padding, prefixed "v1_"; username is empty when the
// request names none. The signature is checked before the expiry, so a
// forged URL never learns whether its expiry would have passed.
func (a *Agent) checkFileSignature(r *http.Request, now time.Time) error {
	if hdr := r.Header.Get(accessTokenHeader); hdr != "" {
		if !a.state.tokenMatches(hdr) {
			return errHeaderMismatch
		}
		return nil
	}
	q := r.URL.Query()
	if !q.Has("signature") {
		return errNoSignature
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	var exp *int64
	if raw := q.Get("signature_expiration"); raw != "" {
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: invalid format for parameter signature_expiration: %v", errBadRequest, err)
		}
		exp = &v
	}
	want := fileSignature(q.Get("path"), op, q.Get("username"), a.state.token(), exp)
	if subtle.ConstantTimeCompare([]byte(want), []byte(q.Get("signature"))) != 1 {
		return errBadSignature
	}
	if exp != nil && *exp < now.Unix() {
		return errExpiredSignature
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
