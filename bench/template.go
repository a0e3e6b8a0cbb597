package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// privateTemplates are the templates the daemon needs (it builds both at
// start and refuses to run without either): base, which raw runsc uses too,
// and the code interpreter's.
var privateTemplates = []string{"base", codeInterpreterTemplate}

// privateTemplateDir copies <shared>/<t> (its .complete marker and rootfs)
// for every t of privateTemplates into <tmp>/templates and returns that
// directory. Both the bench daemon and raw runsc then use this
// byte-identical copy of the base rootfs.
//
// Why: a daemon installs its agent into <template-dir>/<t>/rootfs and
// deletes every template image but its own (internal/template installAgent,
// internal/daemon removeStaleSeeds). With other daemons of other builds
// sharing the directory, the bench's template image vanished mid-run
// ("image … is not a directory") and the bench in turn would delete
// theirs. A private copy keeps both sides out of each other's way.
func privateTemplateDir(ctx context.Context, shared, tmp string) (string, error) {
	root := filepath.Join(tmp, "templates")
	for _, t := range privateTemplates {
		src := filepath.Join(shared, t)
		dst := filepath.Join(root, t)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return "", err
		}
		t0 := time.Now()
		for _, name := range []string{".complete", "rootfs"} {
			out, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", filepath.Join(src, name), dst).CombinedOutput()
			if err != nil {
				return "", fmt.Errorf("copy template %s/%s: %v: %s", t, name, err, strings.TrimSpace(string(out)))
			}
		}
		slog.Info("copied a template", "from", src, "to", dst, "took", time.Since(t0).Round(time.Millisecond))
	}
	return root, nil
}
