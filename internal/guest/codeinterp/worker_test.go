package codeinterp

import (
	"strconv"
	"strings"
	"testing"
)

func TestMarkerScanner(t *testing.T) {
	const marker = "\x1eEND:"
	tests := []struct {
		name   string
		chunks []string
		want   string // text chunks joined by |, ends as <rc>
	}{
		{"simple", []string{"hi\n\x1eEND:0\n"}, "hi\n|<0>"},
		{"no newline before marker", []string{"abc\x1eEND:7\nrest"}, "abc|<7>|rest"},
		{"split marker", []string{"ab\x1eE", "ND:", "1", "2\n"}, "ab|<12>"},
		{"split utf8", []string{"h\xc3", "\xa9\x1eEND:0\n"}, "h|é|<0>"},
		{"prefix that is not a marker", []string{"x\x1eE", "Y\n"}, "x|\x1eEY\n"},
		{"two cells", []string{"a\x1eEND:0\nb\x1eEND:1\n"}, "a|<0>|b|<1>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := markerScanner{marker: []byte(marker)}
			var got []string
			for _, c := range tc.chunks {
				sc.feed([]byte(c), func(text string, end bool, rc int) {
					if end {
						got = append(got, "<"+strconv.Itoa(rc)+">")
					} else {
						got = append(got, text)
					}
				})
			}
			if s := strings.Join(got, "|"); s != tc.want {
				t.Errorf("got %q, want %q", s, tc.want)
			}
		})
	}
}

func TestNormalizeLanguage(t *testing.T) {
	tests := map[string]string{"": "python", "Python": "python", "python3": "python", "bash": "bash", " sh ": "bash", "js": "javascript", "JavaScript": "javascript", "ts": "typescript", "TypeScript": "typescript", "ruby": ""}
	for in, want := range tests {
		got, err := normalizeLanguage(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("normalizeLanguage(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestBashEnvScripts(t *testing.T) {
	pre, post, err := bashEnvScripts(map[string]string{"G": "it's"}, map[string]string{"A": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(pre, `export G='it'\''s'`) || !strings.Contains(pre, "export A='1'") || !strings.Contains(post, "unset A") {
		t.Errorf("pre %q post %q", pre, post)
	}
	if _, _, err := bashEnvScripts(nil, map[string]string{"BAD-NAME": "x"}); err == nil {
		t.Error("invalid variable name accepted")
	}
}
