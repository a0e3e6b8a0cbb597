package template

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompleteVersion(t *testing.T) {
	tests := []struct {
		name, marker string
		write        bool
		want         bool
	}{
		{"no marker", "", false, false},
		{"current recipe", codeInterpreterVersion + "\n", true, true},
		{"older recipe", baseVersion + "+codeinterp-0\n", true, false},
		{"base marker", baseVersion + "\n", true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.write {
				if err := os.WriteFile(filepath.Join(dir, ".complete"), []byte(tc.marker), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := completeVersion(dir, codeInterpreterVersion); got != tc.want {
				t.Errorf("completeVersion = %v, want %v", got, tc.want)
			}
		})
	}
	if !strings.HasPrefix(codeInterpreterVersion, baseVersion) {
		t.Errorf("recipe version %q does not follow the base's %q", codeInterpreterVersion, baseVersion)
	}
}
