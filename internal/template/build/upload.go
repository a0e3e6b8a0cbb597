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
	"strings"
	"sync"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/oci"
	"github.com/forkbox/forkbox/internal/template/dockerfile"
)

// DefaultMaxUpload caps the unpacked size of one uploaded build context.
const DefaultMaxUpload = 1 << 30

// Uploads keeps the build contexts E2B clients upload for COPY steps,
// unpacked, under dir/<templateID>/<filesHash>. The SDK's filesHash is a
// cache key over the COPY line and the files' names, modes, sizes and
// contents — but a directory's size there is the client filesystem's
// st_size, which no tar carries, so the key cannot be recomputed here and
// is never trusted alone:
//
//   - uploads are per template: what one template's client sent under a
//     hash is never another template's COPY, whatever hash it claims;
//   - each upload has a digest of the files it unpacked to (names, types,
//     modes, sizes, contents, link targets; contentDigest), kept beside
//     it: a second upload of a hash with other files is refused
//     (ErrConflict), not silently dropped, and a COPY layer's cache key is
//     that digest, not the client's hash, so templates share a COPY layer
//     only when their files are the same.
//
// The tar itself is unpacked as untrusted input (no path outside its
// root, no symlinked parents, no devices, a size cap) into a scratch
// directory that is renamed into place only when complete.
type Uploads struct {
	dir string
	max int64
	// mu serialises the commits of uploads (compare, rename, digest).
	mu sync.Mutex
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
	// Scratch directories of uploads a crash interrupted, and uploads of
	// the layout before uploads were per template (dir/<hash>): no
	// template owns those, and a client uploads again what is missing.
	ents, _ := os.ReadDir(filepath.Join(dir, "tmp"))
	for _, e := range ents {
		os.RemoveAll(filepath.Join(dir, "tmp", e.Name()))
	}
	ents, _ = os.ReadDir(dir)
	for _, e := range ents {
		if hashRE.MatchString(e.Name()) {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return &Uploads{dir: dir, max: maxBytes}, nil
}

var (
	hashRE = regexp.MustCompile(`^[0-9a-f]{64}$`)
	idRE   = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z_-]{0,127}$`)
)

func checkHash(hash string) error {
	if !hashRE.MatchString(hash) {
		return fmt.Errorf("files hash %q: want 64 lowercase hex digits: %w", hash, errdefs.ErrInvalidArgument)
	}
	return nil
}

// Path is where template templateID's unpacked upload of hash is
// (whether or not present).
func (u *Uploads) Path(templateID, hash string) (string, error) {
	if err := checkHash(hash); err != nil {
		return "", err
	}
	if !idRE.MatchString(templateID) || templateID == "tmp" {
		return "", fmt.Errorf("template id %q: %w", templateID, errdefs.ErrInvalidArgument)
	}
	return filepath.Join(u.dir, templateID, hash), nil
}

// Has reports whether template templateID's upload of hash is complete.
func (u *Uploads) Has(templateID, hash string) bool {
	_, err := u.Digest(templateID, hash)
	return err == nil
}

// Digest returns the content digest of template templateID's upload of
// hash (ErrNotFound when there is none).
func (u *Uploads) Digest(templateID, hash string) (string, error) {
	p, err := u.Path(templateID, hash)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(p + digestSuffix)
	if err != nil {
		return "", fmt.Errorf("files %s of template %s were not uploaded: %w", hash, templateID, errdefs.ErrNotFound)
	}
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("files %s of template %s were not uploaded: %w", hash, templateID, errdefs.ErrNotFound)
	}
	return string(b), nil
}

// digestSuffix names the file beside an upload holding its digest,
// written after the upload is in place (so a digest means complete).
const digestSuffix = ".digest"

// Put unpacks a tar (gzip'd or not, whatever the client said) as template
// templateID's upload of hash. An upload of a hash the template already
// has is unpacked and compared: the same files are accepted (and
// dropped), other files are ErrConflict.
func (u *Uploads) Put(ctx context.Context, templateID, hash string, body io.Reader) error {
	final, err := u.Path(templateID, hash)
	if err != nil {
		return err
	}
	scratch, err := os.MkdirTemp(filepath.Join(u.dir, "tmp"), hash[:12]+"-")
	if err != nil {
		return fmt.Errorf("uploads: %w", err)
	}
	defer os.RemoveAll(scratch)
	if err := u.unpack(ctx, scratch, hash, body); err != nil {
		return err
	}
	digest, err := contentDigest(scratch)
	if err != nil {
		return fmt.Errorf("upload %s: %w", hash, err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if have, err := u.Digest(templateID, hash); err == nil {
		if have != digest {
			return fmt.Errorf("files hash %s of template %s was uploaded before with other files; "+
				"an upload never replaces another (a changed file changes the SDK's hash): %w", hash, templateID, errdefs.ErrConflict)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return fmt.Errorf("uploads: %w", err)
	}
	os.RemoveAll(final) // an incomplete one: no digest was written
	if err := os.Rename(scratch, final); err != nil {
		return fmt.Errorf("uploads: %w", err)
	}
	return os.WriteFile(final+digestSuffix, []byte(digest), 0o600)
}

// unpack applies the (maybe gzip'd) tar body into scratch as untrusted.
func (u *Uploads) unpack(ctx context.Context, scratch, hash string, body io.Reader) error {
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
	return nil
}

// Remove deletes every upload of template templateID (it was deleted).
func (u *Uploads) Remove(templateID string) error {
	p, err := u.Path(templateID, strings.Repeat("0", 64))
	if err != nil {
		return err
	}
	return os.RemoveAll(filepath.Dir(p))
}

// Files reports whether template ref (id, name or name:tag) has its
// client's upload of hash, and returns the template's id.
func (s *Service) Files(ctx context.Context, ref, hash string) (string, bool, error) {
	r, err := s.Get(ctx, ref)
	if err != nil {
		return "", false, err
	}
	if _, err := s.cfg.Uploads.Path(r.ID, hash); err != nil {
		return "", false, err
	}
	return r.ID, s.cfg.Uploads.Has(r.ID, hash), nil
}

// PutFiles stores body (a tar, maybe gzip'd) as template ref's upload of
// hash (see Uploads.Put).
func (s *Service) PutFiles(ctx context.Context, ref, hash string, body io.Reader) error {
	r, err := s.Get(ctx, ref)
	if err != nil {
		return err
	}
	return s.cfg.Uploads.Put(ctx, r.ID, hash, body)
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
