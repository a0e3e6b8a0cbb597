package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store/pgtest"
)

// parallel runs f(0..n-1) at once and returns their errors.
func parallel(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(i) }()
	}
	wg.Wait()
	return errs
}

// TestConcurrentPutsPage: sandboxes put from many goroutines at once are
// each listed exactly once, in creation (seq) order, across pages, and
// counted; what the Manager's creates and clones rely on.
func TestConcurrentPutsPage(t *testing.T) { eachBackend(t, testConcurrentPutsPage) }

func testConcurrentPutsPage(t *testing.T, s *Store) {
	ctx := context.Background()
	const n = 40
	for _, err := range parallel(n, func(i int) error {
		st := "running"
		if i%4 == 0 {
			st = "paused"
		}
		sb := &Sandbox{ID: fmt.Sprintf("c%02d", i), State: st, EndAt: time.Unix(int64(i), 0).UTC()}
		if err := s.PutSandbox(ctx, sb); err != nil {
			return err
		}
		return s.PutSandbox(ctx, sb) // a replace keeps the record's place
	}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	ids := listAll(t, s, SandboxFilter{})
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	if len(ids) != n || len(slices.Compact(sorted)) != n {
		t.Fatalf("listed %d (%v), want %d distinct", len(ids), ids, n)
	}
	desc := listAll(t, s, SandboxFilter{Desc: true})
	slices.Reverse(desc)
	if !slices.Equal(desc, ids) {
		t.Errorf("newest-first listing is not the reverse of creation order:\n%v\n%v", desc, ids)
	}
	if c, err := s.CountSandboxes(ctx, []string{"paused"}); err != nil || c != n/4 {
		t.Errorf("count paused = %d %v, want %d", c, err, n/4)
	}
	got, err := s.GetSandbox(ctx, "c07")
	if err != nil || !got.EndAt.Equal(time.Unix(7, 0)) {
		t.Errorf("get c07: %+v %v", got, err)
	}
}

// TestAliasRace: of templates racing to take one alias, exactly one gets
// it and the others are ErrAlreadyExists with nothing half written.
func TestAliasRace(t *testing.T) { eachBackend(t, testAliasRace) }

func testAliasRace(t *testing.T, s *Store) {
	ctx := context.Background()
	const n = 8
	errs := parallel(n, func(i int) error {
		return s.PutTemplate(ctx, &Template{ID: fmt.Sprintf("t%d", i), Kind: KindTemplate, Aliases: []string{"shared", fmt.Sprintf("own%d", i)}})
	})
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("t%d and t%d both took the alias", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, errdefs.ErrAlreadyExists):
			t.Fatalf("t%d: %v, want already exists", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no put won")
	}
	if tpl, err := s.GetTemplate(ctx, "shared"); err != nil || tpl.ID != fmt.Sprintf("t%d", won) {
		t.Fatalf("shared resolves to %+v %v, want t%d", tpl, err, won)
	}
	if all, err := s.ListTemplates(ctx, ""); err != nil || len(all) != 1 {
		t.Errorf("templates: %d %v, want the winner only", len(all), err)
	}
}

// TestSecretVersions: concurrent updates of one secret each add one to
// its version; a second secret of the same name is refused.
func TestSecretVersions(t *testing.T) { eachBackend(t, testSecretVersions) }

func testSecretVersions(t *testing.T, s *Store) {
	ctx := context.Background()
	now := time.Unix(10, 0).UTC()
	sec := &Secret{ID: "sec1", Name: "token", Version: 1, Sealed: []byte{0, 1, 2, 255}, CreatedAt: now, UpdatedAt: now}
	if err := s.CreateSecret(ctx, sec); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSecret(ctx, &Secret{ID: "sec2", Name: "token", Sealed: []byte{1}}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("second secret named token: %v", err)
	}
	const n = 10
	for _, err := range parallel(n, func(i int) error {
		_, err := s.UpdateSecret(ctx, "token", []byte{byte(i)}, map[string]string{"by": fmt.Sprint(i)}, now.Add(time.Second))
		return err
	}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetSecret(ctx, "sec1")
	if err != nil || got.Version != 1+n || len(got.Sealed) != 1 || !got.UpdatedAt.Equal(now.Add(time.Second)) {
		t.Fatalf("after %d updates: %+v %v", n, got, err)
	}
	if _, err := s.UpdateSecret(ctx, "nope", nil, nil, now); !errdefs.IsNotFound(err) {
		t.Errorf("update missing: %v", err)
	}
	page, next, err := s.ListSecrets(ctx, 1, "")
	if err != nil || len(page) != 1 || next != "" {
		t.Errorf("list: %v %q %v", page, next, err)
	}
	if err := s.DeleteSecret(ctx, "token"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSecret(ctx, "token"); !errdefs.IsNotFound(err) {
		t.Errorf("delete twice: %v", err)
	}
}

// TestClusterValueRace: daemons racing to make a cluster-wide value all
// end with the first one's, as do API keys added twice.
func TestClusterValueRace(t *testing.T) { eachBackend(t, testClusterValueRace) }

func testClusterValueRace(t *testing.T, s *Store) {
	ctx := context.Background()
	if _, err := s.ClusterValue(ctx, "ca"); !errdefs.IsNotFound(err) {
		t.Fatalf("missing value: %v", err)
	}
	got := make([]string, 8)
	for _, err := range parallel(len(got), func(i int) error {
		v, err := s.EnsureClusterValue(ctx, "ca", []byte(fmt.Sprint("value", i)))
		got[i] = string(v)
		return err
	}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if slices.ContainsFunc(got, func(v string) bool { return v != got[0] }) {
		t.Fatalf("daemons disagree: %v", got)
	}
	errs := parallel(4, func(int) error { return s.AddAPIKey(ctx, "default", "e2b_same", time.Now()) })
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else if !errors.Is(err, errdefs.ErrAlreadyExists) {
			t.Fatalf("add key again: %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d adds of one key succeeded", ok)
	}
}

// TestConcurrentOpen: daemons starting at once on one fresh PostgreSQL
// database migrate it once, and all open it.
func TestConcurrentOpen(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	ctx := context.Background()
	stores := make([]*Store, 8)
	for _, err := range parallel(len(stores), func(i int) (err error) {
		stores[i], err = OpenURL(ctx, url)
		return err
	}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range stores {
		defer s.Close()
	}
	var applied int
	if err := stores[0].db.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&applied); err != nil || applied != len(migrations) {
		t.Fatalf("schema_migrations has %d rows (%v), want %d", applied, err, len(migrations))
	}
	if err := stores[3].PutSandbox(ctx, &Sandbox{ID: "x", State: "running"}); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[5].GetSandbox(ctx, "x"); err != nil {
		t.Errorf("a record written through one store is not seen by another: %v", err)
	}
}
