package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// backend is one engine the conformance suite runs on: database returns
// an opener of one fresh database, which opens it again on each call.
type backend struct {
	name     string
	database func(t *testing.T) func() (*Store, error)
}

var backends = []backend{
	{"sqlite", func(t *testing.T) func() (*Store, error) {
		path := filepath.Join(t.TempDir(), "forkbox.db")
		return func() (*Store, error) { return OpenPath(context.Background(), path) }
	}},
	{"postgres", func(t *testing.T) func() (*Store, error) {
		url := pgtest.Shared(t).NewDatabase(t)
		return func() (*Store, error) { return OpenURL(context.Background(), url) }
	}},
}

// eachBackend runs test on a fresh database of every backend.
func eachBackend(t *testing.T, test func(t *testing.T, s *Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, mustOpen(t, b.database(t))) })
	}
}

// eachOpener is eachBackend for tests that open the database themselves.
func eachOpener(t *testing.T, test func(t *testing.T, open func() (*Store, error))) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b.database(t)) })
	}
}

func mustOpen(t *testing.T, open func() (*Store, error)) *Store {
	t.Helper()
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestReopenKeepsRecords: records survive closing and reopening the file
// (what a daemon restart relies on), and the schema is not migrated twice.
func TestReopenKeepsRecords(t *testing.T) { eachOpener(t, testReopenKeepsRecords) }

func testReopenKeepsRecords(t *testing.T, open func() (*Store, error)) {
	ctx := context.Background()
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	sb := &Sandbox{ID: "a", TemplateID: "base", State: "running", Metadata: map[string]string{"k": "v"},
		EndAt: time.Unix(100, 0).UTC(), Rollbacks: []Rollback{{SnapshotID: "s", At: time.Unix(5, 0).UTC()}}}
	if err := s.PutSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTemplate(ctx, &Template{ID: "base", Kind: KindTemplate, Aliases: []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.GetSandbox(ctx, "a")
	if err != nil || got.Metadata["k"] != "v" || !got.EndAt.Equal(sb.EndAt) || len(got.Rollbacks) != 1 {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
	if tpl, err := s.GetTemplate(ctx, "b"); err != nil || tpl.ID != "base" {
		t.Fatalf("alias after reopen: %+v, %v", tpl, err)
	}
}

// TestNewerSchemaRefused: a database written by a newer forkbox is not
// opened (and so not corrupted) by an older one.
func TestNewerSchemaRefused(t *testing.T) { eachOpener(t, testNewerSchemaRefused) }

func testNewerSchemaRefused(t *testing.T, open func() (*Store, error)) {
	ctx := context.Background()
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	bump := fmt.Sprintf("PRAGMA user_version = %d", len(migrations)+1)
	if s.Postgres() {
		bump = fmt.Sprintf("INSERT INTO schema_migrations(version) VALUES(%d)", len(migrations)+1)
	}
	if _, err := s.db.ExecContext(ctx, bump); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := open(); !errors.Is(err, errdefs.ErrInternal) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("open newer schema: %v, want ErrInternal", err)
	}
}

func TestSandboxRecords(t *testing.T) { eachBackend(t, testSandboxRecords) }

func testSandboxRecords(t *testing.T, s *Store) {
	ctx := context.Background()
	if _, err := s.GetSandbox(ctx, "nope"); !errdefs.IsNotFound(err) {
		t.Fatalf("get unknown: %v", err)
	}
	for i, st := range []string{"running", "paused", "killed", "running"} {
		md := map[string]string{"n": fmt.Sprint(i % 2)}
		if err := s.PutSandbox(ctx, &Sandbox{ID: fmt.Sprintf("s%d", i), State: st, Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	// Replacing a record keeps its place in creation order.
	if err := s.PutSandbox(ctx, &Sandbox{ID: "s0", State: "paused", Metadata: map[string]string{"n": "0"}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		f    SandboxFilter
		want []string
	}{
		{"all", SandboxFilter{}, []string{"s0", "s1", "s2", "s3"}},
		{"by state", SandboxFilter{States: []string{"paused"}}, []string{"s0", "s1"}},
		{"two states", SandboxFilter{States: []string{"running", "killed"}}, []string{"s2", "s3"}},
		{"by metadata", SandboxFilter{Metadata: map[string]string{"n": "1"}}, []string{"s1", "s3"}},
		{"metadata and state", SandboxFilter{States: []string{"paused"}, Metadata: map[string]string{"n": "1"}}, []string{"s1"}},
		{"missing key", SandboxFilter{Metadata: map[string]string{"x": ""}}, nil},
		{"by ids", SandboxFilter{IDs: []string{"s3", "nope", "s1", "s2"}}, []string{"s1", "s2", "s3"}},
		{"ids and state", SandboxFilter{IDs: []string{"s0", "s1", "s2"}, States: []string{"paused"}}, []string{"s0", "s1"}},
		{"no ids", SandboxFilter{IDs: []string{}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := listAll(t, s, tc.f); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if err := s.DeleteSandbox(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSandbox(ctx, "s2"); err != nil {
		t.Errorf("deleting a missing record: %v", err)
	}
	if got := listAll(t, s, SandboxFilter{}); !slices.Equal(got, []string{"s0", "s1", "s3"}) {
		t.Errorf("after delete: %v", got)
	}
}

// listAll pages through a listing two at a time.
func listAll(t *testing.T, s *Store, f SandboxFilter) []string {
	t.Helper()
	f.Limit = 2
	var ids []string
	for page := 0; ; page++ {
		sbs, next, err := s.ListSandboxes(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		if len(sbs) > 2 {
			t.Fatalf("page of %d over the limit", len(sbs))
		}
		for _, sb := range sbs {
			ids = append(ids, sb.ID)
		}
		if next == "" {
			return ids
		}
		if page > 100 {
			t.Fatal("paging does not end")
		}
		f.NextToken = next
	}
}

func TestBadPageToken(t *testing.T) { eachBackend(t, testBadPageToken) }

func testBadPageToken(t *testing.T, s *Store) {
	for _, tok := range []string{"%%%", "eA", "c3g"} { // not base64, "x", "sx"
		if _, _, err := s.ListSandboxes(context.Background(), SandboxFilter{NextToken: tok}); !errdefs.IsInvalidArgument(err) {
			t.Errorf("token %q: %v, want invalid argument", tok, err)
		}
	}
}

func TestTemplates(t *testing.T) { eachBackend(t, testTemplates) }

func testTemplates(t *testing.T, s *Store) {
	ctx := context.Background()
	put := func(tpl *Template) error { return s.PutTemplate(ctx, tpl) }
	if err := put(&Template{ID: "base", Kind: KindTemplate, Aliases: []string{"b", "default"}}); err != nil {
		t.Fatal(err)
	}
	if err := put(&Template{ID: "snap1", Kind: KindSnapshot, Aliases: []string{"mine"}, SourceSandboxID: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := put(&Template{ID: "snap2", Kind: KindSnapshot, Aliases: []string{"b"}}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("alias held by another template: %v", err)
	}
	if _, err := s.GetTemplate(ctx, "snap2"); !errdefs.IsNotFound(err) {
		t.Fatalf("a refused put was half written: %v", err)
	}
	for _, name := range []string{"base", "b", "default"} {
		if tpl, err := s.GetTemplate(ctx, name); err != nil || tpl.ID != "base" {
			t.Errorf("get %q: %+v %v", name, tpl, err)
		}
	}
	// Re-putting replaces the aliases.
	if err := put(&Template{ID: "base", Kind: KindTemplate, Aliases: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTemplate(ctx, "b"); !errdefs.IsNotFound(err) {
		t.Errorf("dropped alias still resolves: %v", err)
	}
	snaps, err := s.ListTemplates(ctx, KindSnapshot)
	if err != nil || len(snaps) != 1 || snaps[0].ID != "snap1" || snaps[0].SourceSandboxID != "x" {
		t.Fatalf("list snapshots: %+v %v", snaps, err)
	}
	if all, _ := s.ListTemplates(ctx, ""); len(all) != 2 {
		t.Errorf("list all: %d templates", len(all))
	}
	if err := s.DeleteTemplate(ctx, "snap1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTemplate(ctx, "mine"); !errdefs.IsNotFound(err) {
		t.Errorf("alias outlived its template: %v", err)
	}
	if err := s.DeleteTemplate(ctx, "snap1"); !errdefs.IsNotFound(err) {
		t.Errorf("delete missing: %v", err)
	}
}

func TestAPIKeysAreHashed(t *testing.T) { eachBackend(t, testAPIKeysAreHashed) }

func testAPIKeysAreHashed(t *testing.T, s *Store) {
	ctx := context.Background()
	const key = "e2b_secret_key_value"
	if n, err := s.CountAPIKeys(ctx); err != nil || n != 0 {
		t.Fatalf("count empty: %d %v", n, err)
	}
	if err := s.AddAPIKey(ctx, "ci", key, time.Now()); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.HasAPIKey(ctx, key); err != nil || !ok {
		t.Fatalf("known key: %v %v", ok, err)
	}
	if ok, _ := s.HasAPIKey(ctx, key+"x"); ok {
		t.Error("unknown key accepted")
	}
	if err := s.AddAPIKey(ctx, "again", key, time.Now()); err == nil {
		t.Error("the same key added twice")
	}
	if n, _ := s.CountAPIKeys(ctx); n != 1 {
		t.Errorf("count = %d", n)
	}
	var stored string
	if err := s.db.QueryRowContext(ctx, `SELECT key_hash FROM api_keys`).Scan(&stored); err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	if stored == "" || strings.Contains(stored, key) {
		t.Errorf("database holds %q for key %q: not a hash", stored, key)
	}
}

func TestVolumes(t *testing.T) { eachBackend(t, testVolumes) }

func testVolumes(t *testing.T, s *Store) {
	ctx := context.Background()
	a := &Volume{ID: "v1", Name: "alpha", Token: "t1", SizeMB: 8, Node: "host", CreatedAt: time.Unix(1, 0).UTC()}
	if err := s.PutVolume(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.PutVolume(ctx, &Volume{ID: "v2", Name: "alpha"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("a second volume named alpha: %v, want already exists", err)
	}
	if err := s.PutVolume(ctx, &Volume{ID: "v3", Name: "beta"}); err != nil {
		t.Fatal(err)
	}
	for _, get := range []func() (*Volume, error){
		func() (*Volume, error) { return s.GetVolume(ctx, "v1") },
		func() (*Volume, error) { return s.GetVolumeByName(ctx, "alpha") },
	} {
		if v, err := get(); err != nil || *v != *a {
			t.Errorf("get: %+v %v, want %+v", v, err, a)
		}
	}
	if vs, err := s.ListVolumes(ctx); err != nil || len(vs) != 2 || vs[0].ID != "v1" || vs[1].ID != "v3" {
		t.Errorf("list: %v %v", vs, err)
	}
	if err := s.DeleteVolume(ctx, "v1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteVolume(ctx, "v1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if _, err := s.GetVolumeByName(ctx, "alpha"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
}
