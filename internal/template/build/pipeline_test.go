package build

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/template/dockerfile"
)

func TestCheckSpec(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		ok   bool
	}{
		{"empty", Spec{}, true},
		{"registry", Spec{FromImage: "x", FromImageRegistry: &Registry{Type: "registry", Username: "u"}}, true},
		{"aws", Spec{FromImage: "x", FromImageRegistry: &Registry{Type: "aws"}}, false},
		{"gcp", Spec{FromImage: "x", FromImageRegistry: &Registry{Type: "gcp"}}, false},
		{"both froms", Spec{FromImage: "x", FromTemplate: "y"}, false},
		{"unknown step", Spec{Steps: []dockerfile.Step{{Type: "ADD", Args: []string{"a"}}}}, false},
		{"no args", Spec{Steps: []dockerfile.Step{{Type: "RUN"}}}, false},
	} {
		err := checkSpec(tc.spec)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, errdefs.ErrInvalidArgument)) {
			t.Errorf("%s: checkSpec = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestInvalidUserMessage(t *testing.T) {
	err := invalidUser("whoami", "nobody2")
	if want := "failed to run command 'whoami': command failed: unauthenticated: invalid username: 'nobody2'"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("class of %v", err)
	}
}

func TestLookupUser(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1001::/home/user:/bin/bash\n"), 0o644)
	for _, tc := range []struct {
		name string
		want account
		ok   bool
	}{
		{"root", account{0, 0, "/root"}, true},
		{"user", account{1000, 1001, "/home/user"}, true},
		{"1000", account{1000, 1001, "/home/user"}, true},
		{"nobody", account{}, false},
	} {
		got, ok := lookupUser(root, tc.name)
		if ok != tc.ok || got != tc.want {
			t.Errorf("lookupUser(%q) = %+v %v, want %+v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestSplitName(t *testing.T) {
	for _, tc := range []struct {
		in, name, tag string
		ok            bool
	}{
		{"app", "app", "", true},
		{"app:v1", "app", "v1", true},
		{"", "", "", false},
		{"a/b", "", "", false},
		{string(make([]byte, 129)), "", "", false},
	} {
		n, tag, err := splitName(tc.in)
		if (err == nil) != tc.ok || n != tc.name || tag != tc.tag {
			t.Errorf("splitName(%q) = %q %q %v", tc.in, n, tag, err)
		}
	}
}
