package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/oci"
	"github.com/forkbox/forkbox/internal/store"
)

// Layers and images live in the image store's content-addressed part
// (Config.Content): this file is the build's side of it — which entries a
// build uses, sharing a new layer's unchanged files with its parent, and
// the typed references that keep them: a build in progress holds what it
// made or reused (HolderBuild), a template the layers and images of its
// kept builds (HolderTemplate, from its record). What no holder keeps goes
// at once: an older build's layers when a newer one is ready, a failed
// build's own, a deleted template's unless sandboxes, snapshots or other
// templates still hold them.

func layerRef(key string) images.ContentRef { return images.Layer(key) }
func imageRef(key string) images.ContentRef { return images.TemplateImage(key) }

func (j *job) holder() images.Holder {
	return images.Holder{Kind: images.HolderBuild, ID: j.buildID}
}

func templateHolder(id string) images.Holder {
	return images.Holder{Kind: images.HolderTemplate, ID: id}
}

// useLayer makes layer key the build's current root filesystem, held by
// the build and recorded in it, if it is committed.
func (j *job) useLayer(ctx context.Context, key string) bool {
	if err := j.s.content.Hold(ctx, j.holder(), layerRef(key)); err != nil {
		return false
	}
	dir, err := j.s.content.Open(ctx, layerRef(key))
	if err != nil {
		return false
	}
	j.key, j.layer, j.rootfs = key, key, dir
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	if r := j.s.records[j.tplID]; r != nil {
		if b := findBuild(r, j.buildID); b != nil && !slices.Contains(b.Layers, key) {
			b.Layers = append(b.Layers, key)
		}
	}
	return true
}

// useImage is useLayer for the build's template image.
func (j *job) useImage(ctx context.Context, key string) bool {
	if err := j.s.content.Hold(ctx, j.holder(), imageRef(key)); err != nil {
		return false
	}
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	if r := j.s.records[j.tplID]; r != nil {
		if b := findBuild(r, j.buildID); b != nil {
			b.Image = key
		}
	}
	return true
}

// commitLayer seals scratch (a directory of the build's work dir) as layer
// key: its files the step left alone since copied become hard links to the
// current layer's (copied zero: scratch is no copy of it), and it becomes
// current.
func (j *job) commitLayer(ctx context.Context, scratch, key string, copied time.Time) error {
	if !copied.IsZero() {
		t0 := time.Now()
		sh, err := images.ShareUnchanged(scratch, j.rootfs, copied)
		if err != nil {
			return fmt.Errorf("share the layer's unchanged files: %w", err)
		}
		j.logf("debug", "layer shares %d unchanged files (%.1f MiB) with its parent (%s)", sh.Files, float64(sh.Bytes)/(1<<20), time.Since(t0).Round(time.Millisecond))
	}
	if err := j.s.content.Commit(ctx, layerRef(key), scratch, j.holder()); err != nil {
		return fmt.Errorf("store layer: %w", err)
	}
	if !j.useLayer(ctx, key) {
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
func (j *job) importTemplate(ctx context.Context, t *store.Template) error {
	h := sha256.Sum256([]byte(strings.Join([]string{"import", t.ID, t.Version, t.RootFS}, "\x00")))
	key := hex.EncodeToString(h[:])
	if j.useLayer(ctx, key) {
		return nil
	}
	t0 := time.Now()
	dir, err := j.s.content.Create(ctx, layerRef(key))
	if err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", "--reflink=auto", t.RootFS+"/.", dir).CombinedOutput(); err != nil {
		j.s.content.Abort(ctx, dir)
		return fmt.Errorf("import template %s: %v: %s", t.ID, err, strings.TrimSpace(string(out)))
	}
	if err := j.commitLayer(ctx, dir, key, time.Time{}); err != nil {
		return err
	}
	j.logf("info", "imported template %s as a layer in %s", t.ID, time.Since(t0).Round(time.Millisecond))
	return nil
}

// unpackImage makes img's unpacked root filesystem a layer (once per
// manifest digest) and the build's current one: the base layer copies it
// and shares every file Prepare leaves alone, and it is held like any
// other layer (by the templates built on it), not kept by a cache of its
// own.
func (j *job) unpackImage(ctx context.Context, img *oci.Image) error {
	h := sha256.Sum256([]byte("oci-rootfs\x00" + img.Digest))
	key := hex.EncodeToString(h[:])
	if j.useLayer(ctx, key) {
		return nil
	}
	dir, err := j.s.content.Create(ctx, layerRef(key))
	if err != nil {
		return err
	}
	st, err := j.s.cfg.Images.Unpack(ctx, img, dir)
	if err != nil {
		j.s.content.Abort(context.WithoutCancel(ctx), dir)
		return err
	}
	j.logf("info", "unpacked %s: %d files, %.1f MiB", img.Source, st.Files, float64(st.Bytes)/(1<<20))
	return j.commitLayer(ctx, dir, key, time.Time{})
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

// heldRefs are the content refs r's held builds recorded.
func heldRefs(r *Record) []images.ContentRef {
	var refs []images.ContentRef
	for _, b := range heldBuilds(r) {
		for _, k := range b.Layers {
			refs = append(refs, layerRef(k))
		}
		if b.Image != "" {
			refs = append(refs, imageRef(b.Image))
		}
	}
	return refs
}

// holdLocked makes template r hold exactly its held builds' content; what
// is gone (a record from before its layers were lost) is left out. s.mu
// held.
func (s *Service) holdLocked(ctx context.Context, r *Record) error {
	var refs []images.ContentRef
	for _, ref := range heldRefs(r) {
		if _, err := s.content.Open(ctx, ref); err == nil {
			refs = append(refs, ref)
		}
	}
	return s.content.Set(ctx, templateHolder(r.ID), refs)
}

// migrateContent gives a record written before records named content by
// ref its refs, from the paths it kept: the template's layer, and each
// published build's store template's Content.
func migrateContent(r *Record) {
	if m := r.Meta; m != nil && m.Layer == "" {
		if ref, ok := images.LegacyRef(m.RootFS); ok && ref.Kind == images.KindLayer {
			m.Layer, m.RootFS = ref.Key, ""
		}
	}
	for _, b := range r.Builds {
		if t := b.Published; t != nil && len(t.Content) == 0 {
			t.Content = images.LegacyContent(t.RootFS, t.ImageDir)
			if len(t.Content) > 0 {
				t.RootFS, t.ImageDir = "", ""
			}
		}
	}
}
