package server

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// TestInternalErrorsLogTheirCause: a 500 tells the client only "internal
// error", so the daemon's request log line must carry the cause (at error
// level); other classes keep their info line without it.
func TestInternalErrorsLogTheirCause(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		wantLevel string
		wantCause bool
	}{
		{"internal", errors.New("restore: runsc said no"), "level=ERROR", true},
		{"wrapped internal", fmt.Errorf("rollback: %w", errdefs.ErrInternal), "level=ERROR", true},
		{"not found", fmt.Errorf("sandbox x: %w", errdefs.ErrNotFound), "level=INFO", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			s := &Server{log: slog.New(slog.NewTextHandler(&buf, nil))}
			h := s.logRequests(s.recoverPanics(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				writeError(w, tc.err)
			})))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/sandboxes/x/rollback", nil))
			line := buf.String()
			if !strings.Contains(line, tc.wantLevel) {
				t.Errorf("log %q: want %s", line, tc.wantLevel)
			}
			if got := strings.Contains(line, tc.err.Error()); got != tc.wantCause {
				t.Errorf("log %q: cause logged = %v, want %v", line, got, tc.wantCause)
			}
			if strings.Contains(rec.Body.String(), "runsc") {
				t.Errorf("client saw the cause: %s", rec.Body.String())
			}
		})
	}
}
