package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// requireAPIKey guards the control API: every call but the health probe
// must carry a key Config.Keys knows, in X-API-Key or as a bearer token.
func (s *Server) requireAPIKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The volume content API checks the volume's own token.
		if r.URL.Path == "/health" || isVolumeContent(r) {
			next.ServeHTTP(w, r)
			return
		}
		if err := s.authenticate(r); err != nil {
			writeError(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate checks the request's API key.
func (s *Server) authenticate(r *http.Request) error {
	key := apiKey(r)
	if key == "" {
		return fmt.Errorf("missing API key: send it in the X-API-Key header: %w", errdefs.ErrUnauthenticated)
	}
	ok, err := s.keys.HasAPIKey(r.Context(), key)
	if errors.Is(err, errdefs.ErrUnavailable) {
		// The database is away (a PostgreSQL restart): 503, retry later.
		s.log.Warn("check API key", "err", err)
		return fmt.Errorf("check API key: the database is unavailable, retry later: %w", errdefs.ErrUnavailable)
	}
	if err != nil {
		s.log.Error("check API key", "err", err)
		return fmt.Errorf("check API key: %w", errdefs.ErrInternal)
	}
	if !ok {
		return fmt.Errorf("invalid API key: %w", errdefs.ErrUnauthenticated)
	}
	return nil
}

// apiKey extracts the key from X-API-Key or Authorization: Bearer.
func apiKey(r *http.Request) string {
	if k := strings.TrimSpace(r.Header.Get("X-API-Key")); k != "" {
		return k
	}
	auth := r.Header.Get("Authorization")
	if scheme, tok, ok := strings.Cut(auth, " "); ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(tok)
	}
	return ""
}
