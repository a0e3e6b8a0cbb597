package template

import (
	"strings"
	"testing"
)

func TestFailureLines(t *testing.T) {
	apt := "Setting up a\ndpkg: error processing package openjdk (--configure):\n" + strings.Repeat("Setting up b\n", 20) +
		"Errors were encountered while processing:\n openjdk\nE: Sub-process /usr/bin/dpkg returned an error code (1)\n"
	tests := []struct {
		name, out   string
		want, avoid []string
	}{
		{"the cause printed long before the tail", apt, []string{"dpkg: error processing package openjdk", "E: Sub-process"}, nil},
		{"no error line", "a\nb\nc\n", []string{"a\nb\nc"}, []string{"…"}},
		{"the error inside the tail", "ok\nerror: boom\n", []string{"error: boom"}, []string{"…"}},
	}
	for _, tt := range tests {
		got := failureLines(tt.out, 3)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: failureLines = %q, lacks %q", tt.name, got, w)
			}
		}
		for _, a := range tt.avoid {
			if strings.Contains(got, a) {
				t.Errorf("%s: failureLines = %q, has %q", tt.name, got, a)
			}
		}
	}
}
