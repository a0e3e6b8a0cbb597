package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store/pgtest"
)

// TestOpenURLRejects: a URL that is not PostgreSQL's is refused with the
// reason, before any connection.
func TestOpenURLRejects(t *testing.T) {
	for _, raw := range []string{"", "mysql://db/x", "/var/lib/forkbox/forkbox.db", "postgres://h:notaport/x", "sqlite:///x"} {
		_, err := OpenURL(context.Background(), raw)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "database URL") {
			t.Errorf("OpenURL(%q) = %v, want an invalid-argument error naming the URL", raw, err)
		}
	}
}

// TestOpenURLUnreachable: nothing listening is ErrUnavailable, quickly
// (connect_timeout bounds it), never a hang.
func TestOpenURLUnreachable(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.NewDatabase(t)
	srv.Stop()
	start := time.Now()
	_, err := OpenURL(context.Background(), url)
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("open with the server down: %v, want unavailable", err)
	}
	if d := time.Since(start); d > ConnectTimeout+2*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestDatabaseRestart: while PostgreSQL is down calls fail with
// ErrUnavailable; once it is back the same Store works again.
func TestDatabaseRestart(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	s, err := OpenURL(ctx, srv.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutSandbox(ctx, &Sandbox{ID: "a", State: "running"}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if _, err := s.GetSandbox(ctx, "a"); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("get with the database down: %v, want unavailable", err)
	}
	if err := s.PutSandbox(ctx, &Sandbox{ID: "b", State: "running"}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("put with the database down: %v, want unavailable", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if sb, err := s.GetSandbox(ctx, "a"); err != nil || sb.State != "running" {
		t.Fatalf("get after restart: %+v %v", sb, err)
	}
	if err := s.PutSandbox(ctx, &Sandbox{ID: "b", State: "running"}); err != nil {
		t.Fatalf("put after restart: %v", err)
	}
}

func TestRebind(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`a = ? AND b IN (?,?)`, `a = $1 AND b IN ($2,$3)`},
	} {
		if got := postgresDialect.rebind(tc.in); got != tc.want {
			t.Errorf("rebind(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := sqliteDialect.rebind(tc.in); got != tc.in {
			t.Errorf("sqlite rebind changed %q", tc.in)
		}
	}
}
