package netns

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRemoveOrphanPolicies: a starting Manager keeps the saved policies of
// the networks it found and removes the others' and every half-written
// one (a daemon killed inside savePolicy left <id>.json.tmp: the chaos
// test, seed 1796532607233168133, found one after a restart).
func TestRemoveOrphanPolicies(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"kept.json", "kept.json.tmp", "gone.json", "gone.json.tmp", "other-file"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m := &Manager{cfg: Config{StateDir: dir}}
	m.removeOrphanPolicies(map[string]bool{"kept": true})
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"kept.json", "other-file"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}
