package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/secrets"
)

// Secrets keeps E2B's secrets (*secrets.Vault). No method returns a value.
type Secrets interface {
	Create(ctx context.Context, name, value string, metadata map[string]string) (*secrets.Info, error)
	Update(ctx context.Context, ref, value string, metadata map[string]string) (*secrets.Info, error)
	Get(ctx context.Context, ref string) (*secrets.Info, error)
	Delete(ctx context.Context, ref string) error
	List(ctx context.Context, limit int, next string) ([]*secrets.Info, string, error)
}

// secretJSON is E2B's Secret: metadata only, never the value.
type secretJSON struct {
	SecretID       string            `json:"secretID"`
	Name           string            `json:"name"`
	CurrentVersion int64             `json:"currentVersion"`
	Metadata       map[string]string `json:"metadata"`
	CreatedAt      time.Time         `json:"createdAt"`
	UpdatedAt      time.Time         `json:"updatedAt"`
}

func secretOf(i *secrets.Info) secretJSON {
	return secretJSON{SecretID: i.ID, Name: i.Name, CurrentVersion: i.Version, Metadata: i.Metadata,
		CreatedAt: i.CreatedAt, UpdatedAt: i.UpdatedAt}
}

// secretBody is E2B's NewSecret and SecretUpdate.
type secretBody struct {
	Name     string            `json:"name"`
	Value    *string           `json:"value"`
	Metadata map[string]string `json:"metadata"`
}

// secretRoutes registers E2B's /secrets. The SDK updates with POST
// /secrets/{id}; PATCH does the same.
func (s *Server) secretRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /secrets", s.createSecret)
	mux.HandleFunc("GET /secrets", s.listSecrets)
	mux.HandleFunc("GET /secrets/{id}", s.getSecret)
	mux.HandleFunc("POST /secrets/{id}", s.updateSecret)
	mux.HandleFunc("PATCH /secrets/{id}", s.updateSecret)
	mux.HandleFunc("DELETE /secrets/{id}", s.deleteSecret)
}

func (s *Server) secretsOr501(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Secrets == nil {
		writeStatus(w, http.StatusNotImplemented, r.Method+" "+r.URL.Path+": this server keeps no secrets")
		return false
	}
	return true
}

// decodeSecretBody reads a create's or update's body, which must carry a
// value; false means the error has been answered.
func decodeSecretBody(w http.ResponseWriter, r *http.Request) (secretBody, bool) {
	var b secretBody
	if err := decodeBody(w, r, &b, false); err != nil {
		writeError(w, err)
		return b, false
	}
	if b.Value == nil {
		writeStatus(w, http.StatusBadRequest, "value is required")
		return b, false
	}
	return b, true
}

func (s *Server) createSecret(w http.ResponseWriter, r *http.Request) {
	if !s.secretsOr501(w, r) {
		return
	}
	b, ok := decodeSecretBody(w, r)
	if !ok {
		return
	}
	info, err := s.cfg.Secrets.Create(r.Context(), b.Name, *b.Value, b.Metadata)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, secretOf(info))
}

func (s *Server) updateSecret(w http.ResponseWriter, r *http.Request) {
	if !s.secretsOr501(w, r) {
		return
	}
	b, ok := decodeSecretBody(w, r)
	if !ok {
		return
	}
	info, err := s.cfg.Secrets.Update(r.Context(), r.PathValue("id"), *b.Value, b.Metadata)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, secretOf(info))
}

func (s *Server) getSecret(w http.ResponseWriter, r *http.Request) {
	if !s.secretsOr501(w, r) {
		return
	}
	info, err := s.cfg.Secrets.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, secretOf(info))
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) {
	if !s.secretsOr501(w, r) {
		return
	}
	if err := s.cfg.Secrets.Delete(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) {
	if !s.secretsOr501(w, r) {
		return
	}
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, fmt.Errorf("limit %q: want a positive integer: %w", v, errdefs.ErrInvalidArgument))
			return
		}
		limit = n
	}
	page, next, err := s.cfg.Secrets.List(r.Context(), limit, r.URL.Query().Get("nextToken"))
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]secretJSON, len(page))
	for i, p := range page {
		out[i] = secretOf(p)
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, out)
}
