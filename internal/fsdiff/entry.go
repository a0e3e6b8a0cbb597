// Package fsdiff compares root filesystems the way forkbox keeps them: a
// read-only lower tree (a template's root filesystem on the host) under a
// sandbox's private upper layer, which gVisor serialises as a tar (`runsc
// tar rootfs-upper`: overlay whiteouts are character devices 0/0, opaque
// directories carry trusted.overlay.opaque=y). Two trees over the same
// lower differ only where their upper layers say something, so a diff
// reads the two layers and looks into the lower only at those paths; trees
// over different lowers are walked whole. It also plans three-way merges
// (merge.go) and writes the change set an agent applies (wire.go).
package fsdiff

import (
	"maps"
	"slices"
	"strings"
	"sync"
)

// Type is the kind of a filesystem entry.
type Type string

// The entry types.
const (
	TypeFile    Type = "file"
	TypeDir     Type = "dir"
	TypeSymlink Type = "symlink"
	TypeFifo    Type = "fifo"
	TypeChar    Type = "char"
	TypeBlock   Type = "block"
)

// Entry is what a tree holds at one path: everything a diff compares.
// Modification times are left out on purpose: copying a file up into the
// upper layer, or a rollback, changes them without changing the file.
type Entry struct {
	Type Type `json:"type"`
	// Mode is the permission bits with setuid, setgid and sticky.
	Mode uint32 `json:"mode"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	// Size is a regular file's length in bytes.
	Size int64 `json:"size,omitempty"`
	// SHA256 is a regular file's content hash, hex (set in answers).
	SHA256 string `json:"sha256,omitempty"`
	// Link is a symlink's target.
	Link string `json:"link,omitempty"`
	// Xattrs are the extended attributes (user.e2b.* is E2B's file
	// metadata), overlay bookkeeping left out.
	Xattrs map[string]string `json:"xattrs,omitempty"`
	// Dev is a device's major:minor.
	Dev string `json:"dev,omitempty"`

	// src reads the content of a regular file.
	src source
	// host is set for a template file: its inode and modification time
	// (templates never change, so those identify its content).
	host *hostID
	// hashOnce guards SHA256's computation (hash).
	hashOnce sync.Once
	hashErr  error
}

// source opens an entry's content.
type source interface {
	open() (readCloser, error)
}

// Aspects of an entry a modification names.
const (
	AspectType    = "type"
	AspectContent = "content"
	AspectMode    = "mode"
	AspectOwner   = "owner"
	AspectLink    = "link"
	AspectXattrs  = "xattrs"
)

// differs lists how b differs from a (both present); contents are
// compared by size first, then by hash (computed on demand).
func differs(a, b *Entry) ([]string, error) {
	if a.Type != b.Type {
		return []string{AspectType}, nil
	}
	var what []string
	if a.Type == TypeFile {
		same, err := sameContent(a, b)
		if err != nil {
			return nil, err
		}
		if !same {
			what = append(what, AspectContent)
		}
	}
	if a.Mode != b.Mode {
		what = append(what, AspectMode)
	}
	if a.UID != b.UID || a.GID != b.GID {
		what = append(what, AspectOwner)
	}
	if a.Link != b.Link || a.Dev != b.Dev {
		what = append(what, AspectLink)
	}
	if !maps.Equal(a.Xattrs, b.Xattrs) {
		what = append(what, AspectXattrs)
	}
	return what, nil
}

// hostID identifies a template file on the host.
type hostID struct {
	dev, ino uint64
	mtime    int64
}

// sameContent compares two regular files' contents. Two template files
// (trees over different templates) are the same file if they are one
// inode (layers share unchanged files as hard links) or have the same
// size and modification time to the nanosecond, as rsync judges; all
// others are hashed.
func sameContent(a, b *Entry) (bool, error) {
	if a.Size != b.Size {
		return false, nil
	}
	if a.host != nil && b.host != nil {
		if a.host.dev == b.host.dev && a.host.ino == b.host.ino || a.host.mtime == b.host.mtime && a.host.mtime != 0 {
			return true, nil
		}
	}
	ha, err := a.hash()
	if err != nil {
		return false, err
	}
	hb, err := b.hash()
	if err != nil {
		return false, err
	}
	return ha == hb, nil
}

// Equal reports whether a and b are the same entry (both nil counts).
func Equal(a, b *Entry) (bool, error) {
	if a == nil || b == nil {
		return a == nil && b == nil, nil
	}
	what, err := differs(a, b)
	return len(what) == 0, err
}

// keepXattr drops the overlay's own attributes.
func keepXattr(name string) bool {
	return !strings.HasPrefix(name, "trusted.overlay.")
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
