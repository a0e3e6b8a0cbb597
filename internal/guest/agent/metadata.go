package agent

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/pkg/xattr"
)

// File metadata, as envd 0.6.2 keeps it: each `X-Metadata-<key>: <value>`
// header of an upload becomes the extended attribute user.e2b.<key> of the
// written file. Attributes set inside the sandbox (setfattr) under that
// prefix show up too; other user.* attributes are not metadata. The
// sandbox's writable layer is gVisor's memory-backed overlay, whose tmpfs
// inodes keep xattrs, also for files copied up from the template, through
// rename and in checkpoint images (pause, snapshot, clone, rollback) —
// measured inside the pinned runsc and checked end to end.
const (
	metadataHeaderPrefix = "X-Metadata-"
	metadataXattrPrefix  = "user.e2b."
	// maxMetadataKeyLen keeps the full xattr name within Linux's 255 bytes.
	maxMetadataKeyLen = 255 - len(metadataXattrPrefix)
	// maxMetadataTotalLen bounds a file's metadata (prefixed names plus
	// values), as envd does to fit ext4's one block of xattrs per inode.
	maxMetadataTotalLen = 4096
	// emptyValue is how an empty metadata value is stored: runsc's tar of
	// the sandbox's files (a filesystem-only pause) drops xattrs whose
	// value is empty, so the empty value is kept as one NUL byte, which no
	// client value can be (they are printable ASCII) and which the tar
	// keeps. Read back, it is the empty value again.
	emptyValue = "\x00"
)

// errBadMetadata marks metadata a client may not store.
var errBadMetadata = errors.New("invalid metadata")

// metadataFromHeaders collects the X-Metadata-* headers: keys lowercased,
// a repeated header keeps its first value, an empty key is ignored. Nil
// when there are none — an upload without them clears the file's metadata.
func metadataFromHeaders(h http.Header) map[string]string {
	var md map[string]string
	for name, values := range h {
		if len(values) == 0 || len(name) <= len(metadataHeaderPrefix) ||
			!strings.EqualFold(name[:len(metadataHeaderPrefix)], metadataHeaderPrefix) {
			continue
		}
		if md == nil {
			md = map[string]string{}
		}
		md[strings.ToLower(name[len(metadataHeaderPrefix):])] = values[0]
	}
	return md
}

// validateMetadata applies envd's rules: printable ASCII keys and values,
// a key of at most maxMetadataKeyLen bytes, maxMetadataTotalLen in all.
func validateMetadata(md map[string]string) error {
	total := 0
	for k, v := range md {
		if len(k) > maxMetadataKeyLen {
			return fmt.Errorf("%w: key %q exceeds %d bytes", errBadMetadata, k, maxMetadataKeyLen)
		}
		if err := printableASCII("key", k); err != nil {
			return err
		}
		if err := printableASCII(fmt.Sprintf("value for key %q", k), v); err != nil {
			return err
		}
		total += len(metadataXattrPrefix) + len(k) + len(v)
	}
	if total > maxMetadataTotalLen {
		return fmt.Errorf("%w: total metadata size %d exceeds %d bytes", errBadMetadata, total, maxMetadataTotalLen)
	}
	return nil
}

func printableASCII(what, s string) error {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("%w: %s contains non-printable-ASCII byte 0x%02x at offset %d", errBadMetadata, what, c, i)
		}
	}
	return nil
}

// writeMetadata makes md the file's whole metadata: user.e2b.* attributes
// not in md are removed (O_TRUNC keeps xattrs), the others set. It works on
// the open file so a concurrent rename cannot redirect it. A file system
// without xattrs (procfs, sysfs) keeps the content and no metadata, as in
// envd.
func writeMetadata(f *os.File, md map[string]string) error {
	names, err := xattr.FList(f)
	if xattrUnsupported(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, name := range names {
		key, ok := strings.CutPrefix(name, metadataXattrPrefix)
		if _, keep := md[key]; ok && !keep {
			if err := xattr.FRemove(f, name); err != nil && !errors.Is(err, xattr.ENOATTR) {
				return err
			}
		}
	}
	for k, v := range md {
		if v == "" {
			v = emptyValue
		}
		if err := xattr.FSet(f, metadataXattrPrefix+k, []byte(v)); err != nil {
			return err
		}
	}
	return nil
}

// readMetadata returns the user.e2b.* attributes of path (following a
// symlink, which cannot carry user attributes itself), nil when there are
// none or they cannot be read; an emptyValue reads as "". Values set
// inside the sandbox may hold any bytes; ones that are not UTF-8 are
// skipped because the proto map cannot carry them.
func readMetadata(path string) map[string]string {
	names, err := xattr.List(path)
	if err != nil {
		return nil
	}
	var md map[string]string
	for _, name := range names {
		key, ok := strings.CutPrefix(name, metadataXattrPrefix)
		if !ok || key == "" {
			continue
		}
		v, err := xattr.Get(path, name)
		if err != nil || !utf8.ValidString(key) || !utf8.Valid(v) {
			continue
		}
		if md == nil {
			md = map[string]string{}
		}
		if string(v) == emptyValue {
			v = nil
		}
		md[key] = string(v)
	}
	return md
}

// xattrUnsupported reports a file system that has no extended attributes.
func xattrUnsupported(err error) bool {
	return errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP)
}
