package template

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSlimDocs checks that slimming keeps each package's copyright file
// and nothing else of /usr/share/doc, and leaves symlinked doc dirs alone.
func TestSlimDocs(t *testing.T) {
	doc := t.TempDir()
	files := map[string]string{
		"git/copyright":        "c",
		"git/changelog.gz":     "x",
		"git/RelNotes/1.0.txt": "x",
		"nodejs/copyright":     "c",
		"nodejs/README.md":     "x",
		"python3-pip/NEWS.gz":  "x",
	}
	for name, content := range files {
		p := filepath.Join(doc, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("git", filepath.Join(doc, "git-man")); err != nil {
		t.Fatal(err)
	}
	if err := slimDocs(doc); err != nil {
		t.Fatal(err)
	}
	var left []string
	filepath.WalkDir(doc, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(doc, p)
			left = append(left, rel)
		}
		return nil
	})
	slices.Sort(left)
	want := []string{"git-man", "git/copyright", "nodejs/copyright"}
	if !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}
