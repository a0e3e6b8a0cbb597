package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/runtime/gvisor"
	"github.com/forkbox/forkbox/internal/sandbox"
	"github.com/forkbox/forkbox/internal/store"
)

// imageStores are the two parts of the image store in the data dir: the
// checkpoint images by id (DataDir/images/{paused,snapshots}) and the
// content-addressed layers and template images (DataDir/images/{layers,
// templates}; DataDir/builds in a data dir that has layers there, see
// contentRoot).
type imageStores struct {
	disk    images.Store
	content images.ContentStore
	// flush waits for removals in flight (the disk content store's
	// background remover).
	flush func()
	// object is the object store, with --object-store (nil: local disk).
	object *images.ObjectStore
}

// openImages opens the image stores, migrating a data dir laid out before
// the image store owned every image (migrate.go).
func openImages(ctx context.Context, o Options, st *store.Store) (*imageStores, error) {
	if o.ObjectStore != "" {
		return openObjectImages(ctx, o)
	}
	disk, err := images.NewDisk(filepath.Join(o.DataDir, "images"))
	if err != nil {
		return nil, err
	}
	root, legacy, err := contentRoot(o.DataDir)
	if err != nil {
		return nil, err
	}
	content, err := images.OpenContent(root)
	if err != nil {
		return nil, err
	}
	if err := migrateSeeds(ctx, o, content); err != nil {
		return nil, err
	}
	if legacy {
		if err := migrateRecords(ctx, st, o.Logger); err != nil {
			return nil, fmt.Errorf("migrate records to content refs: %w", err)
		}
	}
	return &imageStores{disk: disk, content: content, flush: content.Flush}, nil
}

// objectStoreStartTimeout bounds how long a start waits for the object
// store to answer: one that does not is a clear error and a non-zero exit,
// not a hang.
const objectStoreStartTimeout = 20 * time.Second

// openObjectImages opens the image stores in the object store of
// --object-store, with DataDir/image-cache as their local cache.
func openObjectImages(ctx context.Context, o Options) (*imageStores, error) {
	runCtx := ctx
	cfg := images.ObjectStoreFromEnv(images.ObjectStoreConfig{
		URL: o.ObjectStore, CacheDir: filepath.Join(o.DataDir, "image-cache"), CacheSize: o.ImageCacheSize,
		OpTimeout: objectStoreStartTimeout, Logger: o.Logger,
	})
	ctx, cancel := context.WithTimeout(ctx, objectStoreStartTimeout)
	defer cancel()
	obj, err := images.OpenObjectStore(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("--object-store %s: %w", o.ObjectStore, err)
	}
	o.Logger.Info("images in object storage", "url", o.ObjectStore, "endpoint", cfg.Endpoint, "cache", cfg.CacheDir, "cache_bytes", o.ImageCacheSize)
	go collectBlobs(runCtx, obj, o.Logger)
	return &imageStores{disk: obj.Images(), content: obj.Content(), flush: func() {}, object: obj}, nil
}

// blobCollectEvery is how often a daemon on an object store removes the
// blobs no image names any more (resumed sandboxes' pause images, deleted
// snapshots); the start-up Collect does it once too.
const blobCollectEvery = time.Hour

// collectBlobs runs the object store's blob collection every
// blobCollectEvery until ctx ends.
func collectBlobs(ctx context.Context, obj *images.ObjectStore, log *slog.Logger) {
	t := time.NewTicker(blobCollectEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := obj.CollectBlobs(ctx)
		if n > 0 || err != nil {
			log.Info("object store: removed blobs no image names", "blobs", n, "err", err)
		}
	}
}

// imageKey names a template image by everything it depends on: the rootfs
// recipe, the agent binary inside it and the runsc that wrote it (a newer
// runsc may not restore an older image).
func imageKey(version string, files ...string) (string, error) {
	h := sha256.New()
	io.WriteString(h, version)
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// sharedTemplateDir reports whether the template directory is outside the
// data dir: a cache several daemons share (tests, an upgrade in
// progress), where a booted image is also left as a seed
// (<id>/image-<key>) for the next daemon to import instead of booting.
func sharedTemplateDir(o Options) bool {
	rel, err := filepath.Rel(o.DataDir, o.TemplateDir)
	return err != nil || rel == ".." || strings.HasPrefix(rel, "../")
}

// seedDir is where a shared template directory keeps template tpl's image
// of key.
func seedDir(o Options, tplID, key string) string {
	return filepath.Join(o.TemplateDir, tplID, "image-"+key)
}

// warmTemplate gives built-in template tpl its booted image in the content
// store (imported from a shared template directory's seed, or booted and
// checkpointed once), and records the template.
func warmTemplate(ctx context.Context, mgr *sandbox.Manager, content images.ContentStore, st *store.Store, tpl *store.Template, o Options) error {
	// The rootfs's path is in the key: a checkpoint names it, and runsc
	// refuses to restore where it differs, so a template dir copied or
	// moved elsewhere boots its own image rather than import the seed
	// left for the old path.
	key, err := imageKey(tpl.Version+"|"+gvisor.FlagsFor(o.AppHugePages)+"|"+strings.Join(tpl.AgentArgs, " ")+"|"+tpl.RootFS,
		o.AgentPath, o.RunscPath)
	if err != nil {
		return err
	}
	ref := images.TemplateImage(key)
	shared := sharedTemplateDir(o)
	seed := seedDir(o, tpl.ID, key)
	h := images.Holder{Kind: images.HolderBuiltin, ID: tpl.ID}
	if _, err := content.Open(ctx, ref); err != nil && shared && isDir(seed) {
		if err := images.Import(ctx, content, ref, seed, h); err != nil {
			o.Logger.Warn("import a shared template image", "template", tpl.ID, "seed", seed, "err", err)
		}
	}
	fmt.Fprintf(o.Out, "template %s: preparing a booted image\n", tpl.ID)
	if err := mgr.WarmTemplate(ctx, tpl, ref); err != nil {
		return err
	}
	if shared {
		exportSeed(ctx, o, content, ref, seed)
		removeStaleSeeds(filepath.Join(o.TemplateDir, tpl.ID), seed)
	}
	return st.PutTemplate(ctx, tpl)
}

// exportSeed leaves a copy (hard links) of image ref in a shared template
// directory for other daemons, unless one is there.
func exportSeed(ctx context.Context, o Options, content images.ContentStore, ref images.ContentRef, seed string) {
	if isDir(seed) {
		return
	}
	tmp := fmt.Sprintf("%s%s%d-%d", seed, scratchInfix, os.Getpid(), time.Now().UnixNano())
	err := images.Export(ctx, content, ref, tmp)
	if err == nil {
		// Another daemon may have been first: its seed is as good.
		if err = os.Rename(tmp, seed); err != nil && isDir(seed) {
			err = nil
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		o.Logger.Warn("leave a template image for other daemons", "seed", seed, "err", err)
	}
}

// staleAfter is how long a seed of another agent/runsc build is kept in a
// shared template directory: a daemon of that build may still import it,
// and no daemon knows the others, so only seeds nobody has rebuilt or
// touched for a day go. (Each daemon's own images are in its image store,
// reference-counted; a seed shares their files by hard link.)
const staleAfter = 24 * time.Hour

// removeStaleSeeds deletes seeds other than keep that have not been
// written for staleAfter, and at once the scratch copy of one whose daemon
// died writing it.
func removeStaleSeeds(dir, keep string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if pid, ok := ScratchOf(e.Name()); ok {
			if !alive(pid) {
				os.RemoveAll(p)
			}
			continue
		}
		info, err := e.Info()
		if err != nil || !strings.HasPrefix(e.Name(), "image-") || p == keep || time.Since(info.ModTime()) < staleAfter {
			continue
		}
		os.RemoveAll(p)
	}
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// collect removes the content nothing holds once every owner of
// references (the Manager's sandboxes and snapshots, the build service's
// templates, the built-in templates) has set them, and from then on makes
// a last release remove at once.
func (s *imageStores) collect(ctx context.Context, log *slog.Logger) error {
	removed, err := s.content.Collect(ctx)
	if len(removed) > 0 {
		log.Info("image store: removed content nothing holds", "entries", len(removed))
	}
	return err
}

// scratchInfix separates a seed's directory name from its scratch
// suffix, "<pid>-<nanoseconds>".
const scratchInfix = ".tmp-"

// ScratchOf returns the pid of the daemon writing scratch directory name
// (a seed's, with exportSeed's suffix).
func ScratchOf(name string) (pid int, ok bool) {
	_, rest, ok := strings.Cut(name, scratchInfix)
	if !ok {
		return 0, false
	}
	p, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(p)
	return pid, err == nil && pid > 0
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	return syscall.Kill(pid, 0) != syscall.ESRCH
}
