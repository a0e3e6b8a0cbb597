package agent

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLinkVolumes(t *testing.T) {
	root := t.TempDir()
	target := filepath.Join(root, "vol0")
	os.Mkdir(target, 0o755)
	p := func(s string) string { return filepath.Join(root, s) }
	os.MkdirAll(p("empty"), 0o755)
	os.MkdirAll(p("full"), 0o755)
	os.WriteFile(p("full/keep"), []byte("k"), 0o644)
	os.WriteFile(p("file"), nil, 0o644)
	os.Symlink("/elsewhere", p("oldlink"))
	for _, tt := range []struct {
		path    string
		wantErr bool
	}{
		{p("new/deep/dir"), false},
		{p("empty"), false},
		{p("oldlink"), false},
		{p("new/deep/dir"), false}, // again: kept
		{p("full"), true},
		{p("file"), true},
		{"relative", true},
		{root + "/a/../b", true},
		{"/", true},
	} {
		err := linkVolumes([]volumeLink{{Path: tt.path, Target: target}})
		if (err != nil) != tt.wantErr {
			t.Errorf("link %s: %v, want error %v", tt.path, err, tt.wantErr)
			continue
		}
		if err == nil {
			if got, _ := os.Readlink(tt.path); got != target {
				t.Errorf("%s links to %q", tt.path, got)
			}
		}
	}
	if _, err := os.Stat(p("full/keep")); err != nil {
		t.Errorf("a non-empty directory lost its files: %v", err)
	}
}
