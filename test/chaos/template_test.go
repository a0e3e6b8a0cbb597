package chaos

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"

	"github.com/forkbox/forkbox/internal/daemon/daemontest"
	"github.com/forkbox/forkbox/internal/sandbox"
)

// shapedDisks are the disk sizes creates ask for besides base's 1024 MiB.
var shapedDisks = []int{512, 768}

// shapedImage names a template image made for another shape.
var shapedImage = regexp.MustCompile(`^(image-[0-9a-f]+)-c\d+-d\d+$`)

// templateProblems checks the run's traces in the shared template dir:
// no scratch of a warm its daemon died in the middle of, and every image
// of another shape made since the run began complete, beside its
// template's image.
func (r *run) templateProblems() []string {
	var p problems
	root := daemontest.TemplateDir(r.t)
	for _, tpl := range dirNames(root) {
		dir := filepath.Join(root, tpl)
		for _, name := range dirNames(dir) {
			path := filepath.Join(dir, name)
			if pid, ok := sandbox.ScratchOf(name); ok {
				if slices.Contains(r.pids, pid) && syscall.Kill(pid, 0) == syscall.ESRCH {
					p.add("template %s: scratch %s of a daemon of this run that is gone", tpl, name)
				}
				continue
			}
			m := shapedImage.FindStringSubmatch(name)
			if fi, err := os.Stat(path); m == nil || err != nil || fi.ModTime().Before(r.start) {
				continue
			}
			if ents, _ := os.ReadDir(path); len(ents) == 0 {
				p.add("template %s: shaped image %s is empty", tpl, name)
			}
			if _, err := os.Stat(filepath.Join(dir, m[1])); err != nil {
				p.add("template %s: shaped image %s without its template's image %s: %v", tpl, name, m[1], err)
			}
		}
	}
	return p
}

// checkTemplates fails the test with templateProblems.
func (r *run) checkTemplates(when string) {
	r.t.Helper()
	for _, s := range r.templateProblems() {
		r.t.Errorf("%s: %s", when, s)
	}
}
