package template

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// debianProfile is the start of bookworm's /etc/profile (base-files 12.4).
const debianProfile = `if [ "$(id -u)" -eq 0 ]; then
  PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
else
  PATH="/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games"
fi
export PATH
`

// TestTuneProfile checks that the tuned profile no longer runs id(1) under
// bash and still sets the same PATH for root and for other users, under
// bash and under sh.
func TestTuneProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "profile")
	if err := os.WriteFile(path, []byte(debianProfile), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tuneProfile(path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), slowUIDTest) {
		t.Fatalf("profile still has %s:\n%s", slowUIDTest, b)
	}
	orig := filepath.Join(t.TempDir(), "orig")
	os.WriteFile(orig, []byte(debianProfile), 0o644)
	for _, sh := range []string{"bash", "sh"} {
		want := sourcedPath(t, sh, orig)
		if got := sourcedPath(t, sh, path); got != want {
			t.Errorf("%s: PATH %q, Debian's profile gives %q", sh, got, want)
		}
	}
}

// sourcedPath is PATH after sh sources profile.
func sourcedPath(t *testing.T, sh, profile string) string {
	t.Helper()
	out, err := exec.Command(sh, "-c", ". "+profile+"; echo $PATH").Output()
	if err != nil {
		t.Fatalf("%s: %v", sh, err)
	}
	return strings.TrimSpace(string(out))
}
