package chaos

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"

	"github.com/forkbox/forkbox/internal/daemon"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// shapedDisks are the disk sizes creates ask for besides base's 1024 MiB.
var shapedDisks = []int{512, 768}

// templateProblems checks the run's traces in the shared template dir,
// where a daemon leaves a copy of each built-in template's booted image
// for the next daemon (its own images, of every shape, are in its image
// store, accounted by contentProblems): no scratch copy of a daemon of
// this run that died writing it, and no image of another shape made since
// the run began (those are the store's only).
func (r *run) templateProblems() []string {
	var p problems
	root := daemontest.TemplateDir(r.t)
	for _, tpl := range dirNames(root) {
		dir := filepath.Join(root, tpl)
		for _, name := range dirNames(dir) {
			if pid, ok := daemon.ScratchOf(name); ok {
				if slices.Contains(r.pids, pid) && syscall.Kill(pid, 0) == syscall.ESRCH {
					p.add("template %s: scratch %s of a daemon of this run that is gone", tpl, name)
				}
				continue
			}
			fi, err := os.Stat(filepath.Join(dir, name))
			if shapedSeed.MatchString(name) && err == nil && !fi.ModTime().Before(r.start) {
				p.add("template %s: an image of another shape, %s, outside the image store", tpl, name)
			}
		}
	}
	return p
}

// shapedSeed names an image of another shape as daemons before the image
// store left them beside the template's.
var shapedSeed = regexp.MustCompile(`^image-[0-9a-f]+-c\d+-d\d+$`)

// checkTemplates fails the test with templateProblems.
func (r *run) checkTemplates(when string) {
	r.t.Helper()
	for _, s := range r.templateProblems() {
		r.errorf("%s: %s", when, s)
	}
}
