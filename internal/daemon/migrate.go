package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/store"
)

// Data dirs laid out before the image store owned every image had the
// template layers and images under builds/{layers,images}, built-in
// template images beside their root filesystems (<template-dir>/<id>/
// image-<key>), unpacked OCI images in oci/rootfs, and records that named
// layers and images by path. This file reads that layout at start.
//
// Layers stay where they are: gVisor keeps the root filesystem's path of
// every checkpoint made on it (the rootfs source annotation, checked at
// restore), so moving a layer would break restoring the paused sandboxes,
// snapshots and template images made on it. A data dir with layers in
// builds/ keeps builds/ as its content root until they are gone; template
// images carry no path and move freely.

// contentRoot picks the content store's root: DataDir/builds while it
// holds layers (legacy), else DataDir/images, moving template images found
// under the other to the one picked.
func contentRoot(dataDir string) (root string, legacy bool, err error) {
	old, cur := filepath.Join(dataDir, "builds"), filepath.Join(dataDir, "images")
	legacy = len(entries(filepath.Join(old, string(images.KindLayer)))) > 0
	root = cur
	if legacy {
		root = old
	}
	dst := filepath.Join(root, string(images.KindTemplateImage))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", false, err
	}
	// images/ is the old name of builds/templates/.
	for _, src := range []string{filepath.Join(old, "images"), filepath.Join(old, string(images.KindTemplateImage))} {
		if src == dst {
			continue
		}
		for _, name := range entries(src) {
			if !isDir(filepath.Join(dst, name)) {
				os.Rename(filepath.Join(src, name), filepath.Join(dst, name))
			}
		}
		os.RemoveAll(src)
	}
	if !legacy {
		os.RemoveAll(filepath.Join(old, string(images.KindLayer))) // nothing but partial writes
	}
	return root, legacy, nil
}

// entries lists the names of dir's entries that are content entries.
func entries(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if e.IsDir() && images.Layer(e.Name()).Validate() == nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// migrateSeeds moves the built-in template images of a template directory
// inside the data dir (the default) into the content store: they are the
// daemon's own, and the image store owns them from now on (each held by
// its template until WarmTemplate keeps only the current one). A shared
// template directory's seeds are other daemons' too: they stay.
func migrateSeeds(ctx context.Context, o Options, content images.ContentStore) error {
	if sharedTemplateDir(o) {
		return nil
	}
	tpls, _ := os.ReadDir(o.TemplateDir)
	for _, t := range tpls {
		dir := filepath.Join(o.TemplateDir, t.Name())
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			key, ok := strings.CutPrefix(e.Name(), "image-")
			if !ok {
				continue
			}
			ref, seed := images.TemplateImage(key), filepath.Join(dir, e.Name())
			if ref.Validate() == nil && isDir(seed) {
				h := images.Holder{Kind: images.HolderBuiltin, ID: t.Name()}
				if err := images.Import(ctx, content, ref, seed, h); err != nil {
					return err
				}
			}
			os.RemoveAll(seed)
		}
	}
	return nil
}

// migrateRecords gives the sandbox and template records written before
// records named content by ref their refs, from the paths they kept.
func migrateRecords(ctx context.Context, st *store.Store, log *slog.Logger) error {
	sbs, _, err := st.ListSandboxes(ctx, store.SandboxFilter{})
	if err != nil {
		return err
	}
	for _, sb := range sbs {
		if refs := images.LegacyContent(sb.RootFS, ""); len(sb.Content) == 0 && len(refs) > 0 {
			sb.Content, sb.RootFS = refs, ""
			if err := st.PutSandbox(ctx, sb); err != nil {
				return err
			}
			log.Info("migrated a sandbox record to content refs", "sandbox", sb.ID, "content", refs)
		}
	}
	for _, kind := range []string{store.KindTemplate, store.KindSnapshot} {
		tpls, err := st.ListTemplates(ctx, kind)
		if err != nil {
			return err
		}
		for _, t := range tpls {
			if err := migrateTemplate(ctx, st, t); err != nil {
				return err
			}
		}
	}
	return nil
}

func migrateTemplate(ctx context.Context, st *store.Store, t *store.Template) error {
	refs := images.LegacyContent(t.RootFS, t.ImageDir)
	if len(t.Content) > 0 || len(refs) == 0 {
		return nil
	}
	t.Content = refs
	if _, ok := images.Find(refs, images.KindLayer); ok {
		t.RootFS = ""
	}
	if _, ok := images.Find(refs, images.KindTemplateImage); ok {
		t.ImageDir = ""
	}
	return st.PutTemplate(ctx, t)
}
