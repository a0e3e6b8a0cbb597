package template

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// dpkgExcludes keeps documentation, manual pages and translations out of
// the base rootfs (copyright files stay): nobody reads them inside a
// sandbox, and every template, snapshot and clone carries the rootfs. The
// file stays in the rootfs, so packages users install later are slim too.
const dpkgExcludes = `# forkbox: no docs, man pages or translations in sandboxes (copyright files kept)
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
path-exclude=/usr/share/lintian/*
`

// slimmedDirs are emptied once after debootstrap, which installed its
// packages before dpkgExcludes existed.
var slimmedDirs = []string{"usr/share/man", "usr/share/info", "usr/share/lintian"}

// installSlim installs pkgs with the rootfs's own apt after turning on
// dpkgExcludes, then drops what debootstrap's packages brought of the
// excluded paths.
func installSlim(ctx context.Context, w io.Writer, start time.Time, root string, pkgs ...string) error {
	conf := filepath.Join(root, "etc/dpkg/dpkg.cfg.d/forkbox-slim")
	if err := os.WriteFile(conf, []byte(dpkgExcludes), 0o644); err != nil {
		return err
	}
	if err := installPackages(ctx, w, start, root, pkgs...); err != nil {
		return err
	}
	for _, d := range slimmedDirs {
		if err := emptyDir(filepath.Join(root, d)); err != nil {
			return err
		}
	}
	return slimDocs(filepath.Join(root, "usr/share/doc"))
}

// emptyDir removes everything inside dir, keeping dir itself.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // nothing to slim
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// slimDocs removes everything under /usr/share/doc but the copyright files.
func slimDocs(doc string) error {
	entries, err := os.ReadDir(doc)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		pkgDir := filepath.Join(doc, e.Name())
		files, err := os.ReadDir(pkgDir)
		if err != nil {
			continue // a symlink to another package's docs
		}
		for _, f := range files {
			if f.Name() != "copyright" {
				if err := os.RemoveAll(filepath.Join(pkgDir, f.Name())); err != nil {
					return fmt.Errorf("slim %s: %w", pkgDir, err)
				}
			}
		}
	}
	return nil
}
