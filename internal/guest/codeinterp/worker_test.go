package codeinterp

import (
	"testing"
)

func TestNormalizeLanguage(t *testing.T) {
	tests := map[string]string{"": "python", "Python": "python", "python3": "python", "bash": "bash", " sh ": "bash", "js": "javascript", "JavaScript": "javascript", "ts": "typescript", "TypeScript": "typescript", "r": "r", "R": "r", "java": "java", "Java": "java", "ruby": ""}
	for in, want := range tests {
		got, err := normalizeLanguage(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("normalizeLanguage(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// The base environment skips names a shell cannot hold, as envd does.
func TestBashBaseEnvSkipsInvalidNames(t *testing.T) {
	got := bashSpec.setEnv(map[string]string{"GOOD": "it's", "BAD-NAME": "x"})
	if want := "export GOOD='it'\\''s'\n"; got != want {
		t.Errorf("setEnv = %q, want %q", got, want)
	}
}
