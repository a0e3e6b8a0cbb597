package build

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/oci"
	"github.com/forkbox/forkbox/internal/template/dockerfile"
)

// DefaultMaxUpload caps the unpacked size of one uploaded build context.
const DefaultMaxUpload = 1 << 30

// Uploads keeps the build contexts E2B clients upload for COPY steps,
// unpacked, under dir/<filesHash>. The SDK's filesHash is a cache key over
// the COPY line and the files' names, modes, sizes and contents — not a
// digest of the tar — so the key is taken as given and the tar itself is
// what is checked: it is unpacked as untrusted input (no path outside its
// root, no symlinked parents, no devices, a size cap) into a scratch
// directory that is renamed into place only when complete.
type Uploads struct {
	dir string
	max int64
}

// NewUploads opens (creating) the upload store; maxBytes <= 0 means
// DefaultMaxUpload.
func NewUploads(dir string, maxBytes int64) (*Uploads, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxUpload
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("uploads: %w", err)
	}
	// Scratch directories of uploads a crash interrupted.
	ents, _ := os.ReadDir(filepath.Join(dir, "tmp"))
	for _, e := range ents {
		os.RemoveAll(filepath.Join(dir, "tmp", e.Name()))
	}
	return &Uploads{dir: dir, max: maxBytes}, nil
}

var hashRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

func checkHash(hash string) error {
	if !hashRE.MatchString(hash) {
		return fmt.Errorf("files hash %q: want 64 lowercase hex digits: %w", hash, errdefs.ErrInvalidArgument)
	}
	return nil
}

// Path is where the unpacked upload of hash is (whether or not present).
func (u *Uploads) Path(hash string) (string, error) {
	if err := checkHash(hash); err != nil {
		return "", err
	}
	return filepath.Join(u.dir, hash), nil
}

// Has reports whether the upload of hash is complete.
func (u *Uploads) Has(hash string) bool {
	p, err := u.Path(hash)
	if err != nil {
		return false
	}
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// Put unpacks a tar (gzip'd or not, whatever the client said) under hash.
// An upload of a hash already present is read and dropped: same key, same
// files.
func (u *Uploads) Put(ctx context.Context, hash string, body io.Reader) error {
	final, err := u.Path(hash)
	if err != nil {
		return err
	}
	if u.Has(hash) {
		_, err := io.Copy(io.Discard, io.LimitReader(body, u.max))
		return err
	}
	scratch, err := os.MkdirTemp(filepath.Join(u.dir, "tmp"), hash[:12]+"-")
	if err != nil {
		return fmt.Errorf("uploads: %w", err)
	}
	defer os.RemoveAll(scratch)
	br := bufio.NewReaderSize(body, 64<<10)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("upload %s: gzip: %v: %w", hash, err, errdefs.ErrInvalidArgument)
		}
		defer zr.Close()
		r = zr
	}
	if _, err := oci.ApplyLayer(ctx, scratch, r, oci.ApplyOptions{Untrusted: true, MaxBytes: u.max}); err != nil {
		return fmt.Errorf("upload %s: %w", hash, err)
	}
	if err := os.Rename(scratch, final); err != nil && !u.Has(hash) {
		return fmt.Errorf("uploads: %w", err)
	}
	return nil
}

// StepKey is the cache key of a build step's layer: the parent layer's
// key, the step itself and the files it copies. Force is not part of it —
// a forced step is rebuilt and its new layer replaces the cached one.
func StepKey(parent string, step dockerfile.Step) string {
	h := sha256.New()
	b, _ := json.Marshal(struct {
		Parent, Type, FilesHash string
		Args                    []string
	}{parent, step.Type, step.FilesHash, step.Args})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}
