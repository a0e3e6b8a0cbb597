package gvisor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// UpperTarName is the file SaveFilesystem writes in its image directory.
const UpperTarName = "rootfs-upper.tar"

// annotationRootfsUpperTar makes runsc fill the root overlay's upper layer
// from a tar at create (runsc/specutils AnnotationRootfsUpperTar); the tar
// is what `runsc tar rootfs-upper` writes.
const annotationRootfsUpperTar = "dev.gvisor.tar.rootfs.upper"

// SaveFilesystem implements runtime.FilesystemSaver with `runsc tar
// rootfs-upper`: the sandbox's in-memory overlay layer (--overlay2=
// root:memory) as a tar, only the files it wrote.
func (r *Runtime) SaveFilesystem(ctx context.Context, id string, imageDir string) error {
	h, err := r.loadHandle(id)
	if err != nil {
		return err
	}
	if err := emptyDir(imageDir); err != nil {
		return err
	}
	_, err = r.run(ctx, r.cfg.Timeout, "tar", "rootfs-upper", "--file="+filepath.Join(imageDir, UpperTarName), h.cid())
	return err
}

// CreateFromFilesystem implements runtime.FilesystemSaver: a Create whose
// OCI spec names the saved layer, which runsc applies over the template
// before the first process starts.
func (r *Runtime) CreateFromFilesystem(ctx context.Context, spec runtime.Spec, imageDir string) (runtime.Info, error) {
	tar, err := filepath.Abs(filepath.Join(imageDir, UpperTarName))
	if err != nil {
		return runtime.Info{}, err
	}
	if fi, err := os.Stat(tar); err != nil || !fi.Mode().IsRegular() {
		return runtime.Info{}, fmt.Errorf("no saved filesystem in %q: %w", imageDir, errdefs.ErrInvalidArgument)
	}
	// runsc honours the annotation only when allowed to: it lets a spec
	// read a host file, which only forkbox writes here.
	return r.create(ctx, spec, func(bundle string) ([]string, error) {
		if err := annotateBundle(bundle, annotationRootfsUpperTar, tar); err != nil {
			return nil, err
		}
		h, err := r.loadHandle(spec.ID)
		if err != nil {
			return nil, err
		}
		h.FromFiles = true
		return []string{"--allow-rootfs-tar-annotation"}, r.saveHandle(h)
	})
}

// fromFilesMarker marks a checkpoint image of a container created with the
// rootfs-upper tar annotation. runsc checks that a restore's spec has the
// checkpointed container's annotations, and the restore cannot name that
// tar again (it is gone with the pause it came from, and the image holds
// the files anyway): such an image is restored with the spec check a
// warning instead of a failure. The annotation is the only difference —
// Restore builds every other part of the spec the same way.
const fromFilesMarker = "forkbox-from-files"

// noteFromFiles marks imageDir when h was booted from saved files.
func noteFromFiles(h handle, imageDir string) error {
	if !h.FromFiles {
		return nil
	}
	return os.WriteFile(filepath.Join(imageDir, fromFilesMarker), nil, 0o600)
}

func fromFilesImage(imageDir string) bool {
	_, err := os.Stat(filepath.Join(imageDir, fromFilesMarker))
	return err == nil
}

// restoreFlags are the global runsc flags of a restore from imageDir.
func restoreFlags(imageDir string) []string {
	if fromFilesImage(imageDir) {
		return []string{"--restore-spec-validation=warning"}
	}
	return nil
}

// inheritFromFiles marks h (saved) as restored from an image of a sandbox
// booted from files: its own checkpoints carry that spec too.
func (r *Runtime) inheritFromFiles(h handle, imageDir string) (handle, error) {
	if !fromFilesImage(imageDir) {
		return h, nil
	}
	h.FromFiles = true
	return h, r.saveHandle(h)
}

// annotateBundle adds one annotation to the OCI config in bundle.
func annotateBundle(bundle, key, value string) error {
	path := filepath.Join(bundle, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var oci specs.Spec
	if err := json.Unmarshal(b, &oci); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if oci.Annotations == nil {
		oci.Annotations = map[string]string{}
	}
	oci.Annotations[key] = value
	return writeJSON(path, &oci)
}

// WriteUpperLayer implements runtime.UpperLayerWriter with `runsc tar
// rootfs-upper`, which holds the root tmpfs's lock while it writes: the
// sandbox's writers wait, its other work goes on.
func (r *Runtime) WriteUpperLayer(ctx context.Context, id string, path string) error {
	h, err := r.loadHandle(id)
	if err != nil {
		return err
	}
	_, err = r.run(ctx, r.cfg.Timeout, "tar", "rootfs-upper", "--file="+path, h.cid())
	return err
}
