package fsdiff

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
)

const (
	paxXattr     = "SCHILY.xattr."
	opaqueXattr  = "trusted.overlay.opaque"
	userXattrPfx = "user."
)

// MaxLayerEntries bounds the paths one layer may hold: their metadata is
// kept in memory (a few hundred bytes each) while a diff runs.
const MaxLayerEntries = 1_000_000

// ErrTooLarge marks a layer past MaxLayerEntries.
var ErrTooLarge = errors.New("too large to diff")

// Layer is one upper layer: the entries it holds, the lower paths it
// deletes (whiteouts) and the directories whose lower contents it hides
// (opaque). Contents stay in the tar file, read on demand.
type Layer struct {
	entries   map[string]*Entry
	whiteouts map[string]bool
	opaque    map[string]bool
	f         *os.File
	// links are hard links read before their targets may be.
	links []link
}

// link is a hard link entry: p names target's inode.
type link struct {
	p, target string
	e         *Entry
}

// resolveLinks gives hard links their targets' contents. gVisor's tar
// names entries by inode, in no order, and every whiteout of an overlay
// shares one inode: a link to a whiteout is a whiteout.
func (l *Layer) resolveLinks() error {
	for _, k := range l.links {
		if l.whiteouts[k.target] {
			l.whiteouts[k.p] = true
			continue
		}
		orig := l.entries[k.target]
		if orig == nil || orig.Type != TypeFile {
			return fmt.Errorf("hard link %q to unknown %q", k.p, k.target)
		}
		k.e.Type, k.e.Size, k.e.src = TypeFile, orig.Size, orig.src
		l.entries[k.p] = k.e
	}
	l.links = nil
	return nil
}

// EmptyLayer is the layer of a tree that is its lower alone (a template).
func EmptyLayer() *Layer {
	return &Layer{entries: map[string]*Entry{}, whiteouts: map[string]bool{}, opaque: map[string]bool{}}
}

// OpenLayer reads the headers of the upper-layer tar at file; the file
// stays open (Close) so contents can be read without copying them.
func OpenLayer(file string) (*Layer, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	l := EmptyLayer()
	l.f = f
	if err := l.read(); err != nil {
		f.Close()
		return nil, fmt.Errorf("read layer %s: %w", file, err)
	}
	return l, nil
}

// Close releases the tar file.
func (l *Layer) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	return l.f.Close()
}

// Len is the number of paths the layer says something about.
func (l *Layer) Len() int { return len(l.entries) + len(l.whiteouts) }

func (l *Layer) read() error {
	cr := newTarFile(l.f)
	tr := tar.NewReader(cr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return l.resolveLinks()
		}
		if err != nil {
			return err
		}
		p, ok := cleanTarName(hdr.Name)
		if !ok {
			return fmt.Errorf("tar entry %q escapes the root", hdr.Name)
		}
		if p == "/" {
			continue
		}
		if l.Len() >= MaxLayerEntries {
			return fmt.Errorf("more than %d files in one layer: %w", MaxLayerEntries, ErrTooLarge)
		}
		if hdr.Typeflag == tar.TypeChar && hdr.Devmajor == 0 && hdr.Devminor == 0 {
			l.whiteouts[p] = true
			continue
		}
		if err := l.add(p, hdr, cr.off); err != nil {
			return err
		}
	}
}

// add records one tar entry whose data starts at off.
func (l *Layer) add(p string, hdr *tar.Header, off int64) error {
	e := &Entry{Mode: uint32(hdr.Mode) & 0o7777, UID: hdr.Uid, GID: hdr.Gid}
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, paxXattr)
		if !ok {
			continue
		}
		if name == opaqueXattr && v == "y" {
			l.opaque[p] = true
		}
		if strings.HasPrefix(name, userXattrPfx) {
			if e.Xattrs == nil {
				e.Xattrs = map[string]string{}
			}
			e.Xattrs[name] = v
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		e.Type = TypeDir
	case tar.TypeReg:
		e.Type, e.Size, e.src = TypeFile, hdr.Size, tarSource{l.f, off, hdr.Size}
	case tar.TypeLink:
		target, ok := cleanTarName(hdr.Linkname)
		if !ok {
			return fmt.Errorf("hard link %q escapes the root", hdr.Name)
		}
		l.links = append(l.links, link{p, target, e})
		return nil
	case tar.TypeSymlink:
		e.Type, e.Link = TypeSymlink, hdr.Linkname
	case tar.TypeFifo:
		e.Type = TypeFifo
	case tar.TypeChar, tar.TypeBlock:
		e.Type = TypeChar
		if hdr.Typeflag == tar.TypeBlock {
			e.Type = TypeBlock
		}
		e.Dev = fmt.Sprintf("%d:%d", hdr.Devmajor, hdr.Devminor)
	default:
		return fmt.Errorf("tar entry %q: unsupported type %q", hdr.Name, hdr.Typeflag)
	}
	l.entries[p] = e
	return nil
}

// cleanTarName turns "./a/b/" into "/a/b", refusing names that leave the
// root.
func cleanTarName(name string) (string, bool) {
	return CleanPath(name)
}

// CleanPath makes p an absolute slash path inside the root; a path that
// climbs out of it ("../x") is refused.
func CleanPath(p string) (string, bool) {
	p = strings.TrimPrefix(p, "./")
	if p == "." || p == "" {
		return "/", true
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", false
		}
	}
	return path.Clean("/" + p), true
}

// tarSource is a regular file's bytes inside the layer's tar.
type tarSource struct {
	f        *os.File
	off, len int64
}

type readCloser = io.ReadCloser

func (s tarSource) open() (readCloser, error) {
	return io.NopCloser(io.NewSectionReader(s.f, s.off, s.len)), nil
}

// copyBufs are hashing buffers: a diff hashes thousands of small files,
// and io.Copy's own 32 KiB buffer each time dominated its cost.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// hash returns (and keeps) the entry's content hash. Layers of snapshots
// are shared by concurrent diffs, so the hash is computed once.
func (e *Entry) hash() (string, error) {
	if e.Type != TypeFile {
		return "", nil
	}
	e.hashOnce.Do(func() { e.hashErr = e.computeHash() })
	return e.SHA256, e.hashErr
}

func (e *Entry) computeHash() error {
	if e.SHA256 != "" {
		return nil
	}
	r, err := e.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	h := sha256.New()
	buf := copyBufs.Get().(*[]byte)
	_, err = io.CopyBuffer(h, struct{ io.Reader }{r}, *buf)
	copyBufs.Put(buf)
	if err != nil {
		return err
	}
	e.SHA256 = hex.EncodeToString(h.Sum(nil))
	return nil
}

// Open reads a regular file's content.
func (e *Entry) Open() (io.ReadCloser, error) {
	if e.src == nil {
		return nil, fmt.Errorf("entry of type %s has no content", e.Type)
	}
	return e.src.open()
}
