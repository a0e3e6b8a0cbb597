package agent

import (
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"google.golang.org/protobuf/types/known/timestamppb"

	fspb "github.com/forkbox/forkbox/api/gen/filesystem"
)

// entryInfo describes the entry at path without following a final symlink.
func entryInfo(path string) (*fspb.EntryInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	return entryFromInfo(path, fi), nil
}

// entryFromInfo builds an EntryInfo, with the file's metadata (user.e2b.*
// attributes). For a symlink, type and mode describe
// the target (as envd does, so a link to a directory lists as a directory)
// and symlink_target holds the resolved target path; a dangling link has
// type unspecified.
func entryFromInfo(path string, fi fs.FileInfo) *fspb.EntryInfo {
	e := &fspb.EntryInfo{
		Name:         fi.Name(),
		Path:         path,
		Size:         fi.Size(),
		Mode:         uint32(fi.Mode().Perm()),
		Permissions:  fi.Mode().String(),
		ModifiedTime: timestamppb.New(fi.ModTime()),
		Type:         fileType(fi.Mode()),
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			target, _ = os.Readlink(path)
			e.Type, e.Mode = fspb.FileType_FILE_TYPE_UNSPECIFIED, 0
		} else if tfi, err := os.Stat(target); err == nil {
			e.Type, e.Mode = fileType(tfi.Mode()), uint32(tfi.Mode().Perm())
		}
		e.SymlinkTarget = &target
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner, e.Group = ownerNames(st.Uid, st.Gid)
	}
	e.Metadata = readMetadata(path)
	return e
}

// fileType maps a mode onto the proto's file types; devices, sockets and
// pipes have no type of their own and report unspecified.
func fileType(m fs.FileMode) fspb.FileType {
	switch {
	case m.IsRegular():
		return fspb.FileType_FILE_TYPE_FILE
	case m.IsDir():
		return fspb.FileType_FILE_TYPE_DIRECTORY
	case m&fs.ModeSymlink != 0:
		return fspb.FileType_FILE_TYPE_SYMLINK
	default:
		return fspb.FileType_FILE_TYPE_UNSPECIFIED
	}
}

// ownerNames returns user and group names, or the numeric ids when the
// account databases do not know them.
func ownerNames(uid, gid uint32) (owner, group string) {
	owner = strconv.FormatUint(uint64(uid), 10)
	group = strconv.FormatUint(uint64(gid), 10)
	if u, err := user.LookupId(owner); err == nil {
		owner = u.Username
	}
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	return owner, group
}
