package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// removeStaleSeeds keeps a shared template dir's current seed, recent
// seeds of other builds and what a live process is writing, and removes
// old seeds (an image of another shape that older daemons left among them)
// and the scratch of a daemon that died writing one.
func TestRemoveStaleSeeds(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keep := filepath.Join(dir, "image-cur")
	old := time.Now().Add(-2 * staleAfter)
	for name, mtime := range map[string]time.Time{
		"image-cur":         old,
		"image-cur-c1-d700": old,
		"image-prev":        old, // another build's, untouched for long: goes
		"image-recent":      time.Now(),
		fmt.Sprintf("image-cur-c2-d512.tmp-%d-abc", os.Getpid()): time.Now(),
		fmt.Sprintf("image-cur.tmp-%d-def", dead.Process.Pid):    time.Now(),
		"rootfs": old,
	} {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleSeeds(dir, keep)
	got := dirNames(dir)
	want := []string{"image-cur", fmt.Sprintf("image-cur-c2-d512.tmp-%d-abc", os.Getpid()), "image-recent", "rootfs"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("left %v, want %v", got, want)
	}
}

func dirNames(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
