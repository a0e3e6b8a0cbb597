package runtime

import "context"

// FilesystemSaver is the optional ability to save only what a sandbox
// changed in its root filesystem (its private layer over Spec.RootFS) and
// to cold-boot a sandbox from the template with those changes applied. It
// is the cheap pause: no memory image, so the saved state is only as big as
// the files written, and what comes back is a fresh boot — files kept,
// processes gone.
type FilesystemSaver interface {
	// SaveFilesystem writes the sandbox's filesystem changes into imageDir,
	// which must exist and be empty. The sandbox keeps its state (callers
	// freeze it first for a consistent copy and delete it after).
	SaveFilesystem(ctx context.Context, id string, imageDir string) error
	// CreateFromFilesystem creates spec like Create, its root filesystem
	// being spec.RootFS with the changes saved in imageDir applied. spec
	// must name the RootFS the changes were saved over. On failure nothing
	// is left behind.
	CreateFromFilesystem(ctx context.Context, spec Spec, imageDir string) (Info, error)
}

// UpperLayerWriter is the optional ability to write what a running sandbox
// changed in its root filesystem as a tar, without stopping it: the
// layer over Spec.RootFS, in the overlay convention (a deleted path is a
// character device 0/0, a directory hiding the lower one carries the
// xattr trusted.overlay.opaque=y; other xattrs as PAX SCHILY.xattr.*).
// Diffs read it (internal/fsdiff).
type UpperLayerWriter interface {
	// WriteUpperLayer writes sandbox id's upper layer to the new file
	// path. The sandbox keeps running; its filesystem is consistent in the
	// tar (writes wait while it is made).
	WriteUpperLayer(ctx context.Context, id string, path string) error
}
