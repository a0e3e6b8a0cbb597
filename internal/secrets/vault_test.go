package secrets

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

func openVault(t *testing.T, dir string) (*Vault, *store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	key, err := LoadOrCreateKey(filepath.Join(dir, KeyFile), true)
	if err != nil {
		t.Fatal(err)
	}
	v, err := New(st, key, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v, st
}

// TestVaultLifecycle: versions start at 1 and add one per update, names are
// lower-cased and found by id or name, the value resolves live, a deleted
// secret is not found, and the database file never holds the value.
func TestVaultLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	v, _ := openVault(t, dir)
	const value = "sk-live-0123456789abcdef"
	info, err := v.Create(ctx, "OpenAI-Key", value, map[string]string{"team": "ml"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "openai-key" || info.Version != 1 || info.Metadata["team"] != "ml" || len(info.ID) < 8 {
		t.Fatalf("created %+v", info)
	}
	if _, err := v.Create(ctx, "openai-key", "x", nil); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	if got, err := v.Resolve(ctx, "OPENAI-KEY"); err != nil || got != value {
		t.Fatalf("resolve = %q, %v", got, err)
	}
	up, err := v.Update(ctx, info.ID, "sk-live-second", nil)
	if err != nil || up.Version != 2 || up.Metadata["team"] != "ml" {
		t.Fatalf("update = %+v, %v", up, err)
	}
	if up, err = v.Update(ctx, "openai-key", "sk-live-third", map[string]string{}); err != nil || up.Version != 3 || len(up.Metadata) != 0 {
		t.Fatalf("update by name = %+v, %v", up, err)
	}
	if got, _ := v.Resolve(ctx, "openai-key"); got != "sk-live-third" {
		t.Fatalf("resolve after update = %q", got)
	}
	for _, f := range []string{"forkbox.db", "forkbox.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		if bytes.Contains(b, []byte("sk-live")) {
			t.Fatalf("%s holds a secret value in the clear", f)
		}
	}
	if err := v.Delete(ctx, "openai-key"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Resolve(ctx, "openai-key"); !errdefs.IsNotFound(err) {
		t.Fatalf("resolve deleted: %v", err)
	}
	if err := v.Delete(ctx, info.ID); !errdefs.IsNotFound(err) {
		t.Fatalf("delete twice: %v", err)
	}
}

// TestVaultRefusals: E2B's name and metadata rules, and values that cannot
// be a header value.
func TestVaultRefusals(t *testing.T) {
	ctx := context.Background()
	v, _ := openVault(t, t.TempDir())
	big := map[string]string{}
	for i := range MaxMetadataEntries + 1 {
		big[string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	for _, tc := range []struct {
		name, value string
		md          map[string]string
	}{
		{"", "v", nil},
		{"a{b", "v", nil},
		{"a}b", "v", nil},
		{"a\nb", "v", nil},
		{"sec_abc", "v", nil},
		{"ok", "", nil},
		{"ok", "line\r\nbreak", nil},
		{"ok", string(make([]byte, MaxValueLen+1)), nil},
		{"ok", "v", big},
		{"ok", "v", map[string]string{"": "v"}},
	} {
		if _, err := v.Create(ctx, tc.name, tc.value, tc.md); !errdefs.IsInvalidArgument(err) {
			t.Errorf("create(%q, %q): %v, want invalid argument", tc.name, tc.value, err)
		}
	}
	if err := v.Exists(ctx, []string{"nope"}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("exists(nope) = %v", err)
	}
}

// TestVaultPaging: pages in creation order with a token to the next.
func TestVaultPaging(t *testing.T) {
	ctx := context.Background()
	v, _ := openVault(t, t.TempDir())
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		if _, err := v.Create(ctx, n, "v-"+n, nil); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	tok := ""
	for pages := 0; ; pages++ {
		page, next, err := v.List(ctx, 2, tok)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page {
			names = append(names, p.Name)
		}
		if next == "" {
			if pages != 2 {
				t.Fatalf("%d pages, want 3", pages+1)
			}
			break
		}
		tok = next
	}
	if got := len(names); got != 5 || names[0] != "a" || names[4] != "e" {
		t.Fatalf("listed %v", names)
	}
	if _, _, err := v.List(ctx, 2, "garbage!"); !errdefs.IsInvalidArgument(err) {
		t.Fatalf("bad token: %v", err)
	}
}

// TestKeyFile: the data dir's key is made once, mode 0600, and reused; a
// loose mode or another key refuses.
func TestKeyFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	v, st := openVault(t, dir)
	if _, err := v.Create(ctx, "k", "value-1", nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, KeyFile)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi.Mode(), err)
	}
	k1, _ := LoadOrCreateKey(path, true)
	k2, err := LoadOrCreateKey(path, true)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("key not reused: %v", err)
	}
	if _, err := LoadOrCreateKey(filepath.Join(dir, "missing"), false); err == nil {
		t.Fatal("a missing operator key file was accepted")
	}
	os.Chmod(path, 0o644)
	if _, err := LoadOrCreateKey(path, true); err == nil {
		t.Fatal("a world-readable key was accepted")
	}
	other := make([]byte, 32)
	v2, _ := New(st, other, nil, nil)
	if _, err := v2.Resolve(ctx, "k"); err == nil {
		t.Fatal("another key opened the value")
	}
}
