package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/sandbox"
	"github.com/forkbox/forkbox/internal/store"
)

// Layers and images live in the image store's content-addressed part
// (images.Content at Config.Dir): this file is the build's side of it —
// which entries a build uses, sharing a new layer's unchanged files with
// its parent, and the references that decide what Collect keeps.

func layerRef(key string) images.ContentRef {
	return images.ContentRef{Kind: images.KindLayer, Key: key}
}
func imageRef(key string) images.ContentRef {
	return images.ContentRef{Kind: images.KindTemplateImage, Key: key}
}

func (s *Service) layerDir(key string) string { return s.content.Path(layerRef(key)) }

// useLayer makes layer key the build's current root filesystem, and a
// reference of its build (so Collect keeps it), if it is committed. The
// check and the reference are taken under s.mu, as Collect runs.
func (j *job) useLayer(key string) bool {
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	if !j.s.content.Has(layerRef(key)) {
		return false
	}
	j.key, j.rootfs = key, j.s.layerDir(key)
	if r := j.s.records[j.tplID]; r != nil {
		if b := findBuild(r, j.buildID); b != nil && !contains(b.Layers, key) {
			b.Layers = append(b.Layers, key)
		}
	}
	return true
}

// useImage is useLayer for the build's template image.
func (j *job) useImage(key string) bool {
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	if !j.s.content.Has(imageRef(key)) {
		return false
	}
	if r := j.s.records[j.tplID]; r != nil {
		if b := findBuild(r, j.buildID); b != nil {
			b.Image = key
		}
	}
	return true
}

// commitLayer seals scratch (a directory of the build's work dir) as layer
// key: its files the step left alone become hard links to the parent
// layer's (when the parent is a layer too), and it becomes current.
func (j *job) commitLayer(scratch, key string, copied time.Time) error {
	if _, ok := j.s.content.RefOf(j.rootfs); ok && !copied.IsZero() {
		t0 := time.Now()
		sh, err := images.ShareUnchanged(scratch, j.rootfs, copied)
		if err != nil {
			return fmt.Errorf("share the layer's unchanged files: %w", err)
		}
		j.logf("debug", "layer shares %d unchanged files (%.1f MiB) with its parent (%s)", sh.Files, float64(sh.Bytes)/(1<<20), time.Since(t0).Round(time.Millisecond))
	}
	if err := j.s.content.Commit(layerRef(key), scratch); err != nil {
		return fmt.Errorf("store layer: %w", err)
	}
	if !j.useLayer(key) {
		return fmt.Errorf("layer %s vanished after its commit", short(key))
	}
	return nil
}

// copyLayer copies the current layer into a scratch directory of the
// build's work dir; it returns the directory's name there and the time
// after which changes to it are the step's (see images.ShareUnchanged).
func (j *job) copyLayer() (string, time.Time, error) {
	if err := os.MkdirAll(j.work, 0o755); err != nil {
		return "", time.Time{}, err
	}
	name := j.step
	dst := filepath.Join(j.work, name)
	os.RemoveAll(dst)
	out, err := exec.Command("cp", "-a", "--reflink=auto", j.rootfs, dst).CombinedOutput()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("copy layer: %v: %s", err, strings.TrimSpace(string(out)))
	}
	copied := time.Now()
	// The kernel stamps change times from a clock that lags by up to a
	// tick: the step starts after it has passed copied.
	time.Sleep(20 * time.Millisecond)
	return name, copied, nil
}

// importTemplate makes a built-in template's root filesystem a layer (once
// per template version), so the layers built on it share its files.
func (j *job) importTemplate(t *store.Template) error {
	h := sha256.Sum256([]byte(strings.Join([]string{"import", t.ID, t.Version, t.RootFS}, "\x00")))
	key := hex.EncodeToString(h[:])
	if j.useLayer(key) {
		return nil
	}
	t0 := time.Now()
	dir, err := j.s.content.Create(layerRef(key))
	if err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", "--reflink=auto", t.RootFS+"/.", dir).CombinedOutput(); err != nil {
		j.s.content.Abort(dir)
		return fmt.Errorf("import template %s: %v: %s", t.ID, err, strings.TrimSpace(string(out)))
	}
	if err := j.s.content.Commit(layerRef(key), dir); err != nil {
		return err
	}
	if !j.useLayer(key) {
		return fmt.Errorf("layer %s vanished after its commit", short(key))
	}
	j.logf("info", "imported template %s as a layer in %s", t.ID, time.Since(t0).Round(time.Millisecond))
	return nil
}

// heldBuilds are the builds of r whose content r holds: the latest (a
// retry reuses its layers), the latest ready one and every build a tag
// names. Older builds' layers go.
func heldBuilds(r *Record) []*Build {
	var out []*Build
	latest := latestReady(r)
	for i, b := range r.Builds {
		if i == len(r.Builds)-1 || b == latest || (b.Published != nil && b.Published.ID != "") {
			out = append(out, b)
		}
	}
	return out
}

// referencesLocked are the typed references to the content: templates'
// builds (a build in progress is its template's latest), and sandboxes
// and snapshots by the root filesystem and image they run on. s.mu held.
func (s *Service) referencesLocked(ctx context.Context) ([]images.Reference, error) {
	var refs []images.Reference
	for _, r := range s.records {
		for _, b := range heldBuilds(r) {
			for _, k := range b.Layers {
				refs = append(refs, images.Reference{Holder: images.HolderTemplate, ID: r.ID, Ref: layerRef(k)})
			}
			if b.Image != "" {
				refs = append(refs, images.Reference{Holder: images.HolderTemplate, ID: r.ID, Ref: imageRef(b.Image)})
			}
		}
	}
	sbs, _, err := s.cfg.Store.ListSandboxes(ctx, store.SandboxFilter{})
	if err != nil {
		return nil, err
	}
	madeOn := s.content.MadeOn(images.KindTemplateImage)
	for _, sb := range sbs {
		if sb.State == string(sandbox.StateKilled) {
			continue // a killed sandbox's record stays for the API; its files are gone
		}
		refs = s.pathRefs(refs, madeOn, images.HolderSandbox, sb.ID, sb.RootFS, sb.ImageDir)
	}
	for kind, h := range map[string]images.HolderKind{store.KindSnapshot: images.HolderSnapshot, store.KindTemplate: images.HolderTemplate} {
		tpls, err := s.cfg.Store.ListTemplates(ctx, kind)
		if err != nil {
			return nil, err
		}
		for _, t := range tpls {
			refs = s.pathRefs(refs, madeOn, h, t.ID, t.RootFS, t.ImageDir)
		}
	}
	return refs, nil
}

// pathRefs adds the references of a holder running on rootfs (and every
// template image made on it: a sandbox restored from one may read it)
// and image, where they are entries of the content store.
func (s *Service) pathRefs(refs []images.Reference, madeOn map[images.ContentRef][]images.ContentRef, h images.HolderKind, id, rootfs, image string) []images.Reference {
	if ref, ok := s.content.RefOf(rootfs); ok {
		refs = append(refs, images.Reference{Holder: h, ID: id, Ref: ref})
		for _, img := range madeOn[ref] {
			refs = append(refs, images.Reference{Holder: h, ID: id, Ref: img})
		}
	}
	if ref, ok := s.content.RefOf(image); ok {
		refs = append(refs, images.Reference{Holder: h, ID: id, Ref: ref})
	}
	return refs
}

// Collect removes the layers and images nothing references any more (a
// deleted template's, unless a sandbox, a snapshot or another template
// still uses them). It runs at start, after a delete and after a build.
func (s *Service) Collect(ctx context.Context) ([]images.ContentRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	refs, err := s.referencesLocked(ctx)
	if err != nil {
		return nil, err
	}
	removed, err := s.content.Collect(ctx, refs)
	if len(removed) > 0 {
		s.log.Info("template content reclaimed", "entries", len(removed))
	}
	return removed, err
}
