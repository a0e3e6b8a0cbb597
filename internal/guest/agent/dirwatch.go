package agent

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// dirWatch remembers stamps of files (stampFiles' answers) until something
// in their directories changes, seen through inotify: checking costs one
// non-blocking read of the inotify descriptor where a stamp costs a stat
// per file. Under gVisor's systrap a syscall takes 40–250 us, and a pooled
// commands.run stat'ed 14 files (the account databases, the login
// profile) before its shell got the command.
//
// Every change inside the sandbox goes through its kernel and so raises an
// event; a change from outside does not (a volume another sandbox writes),
// so a directory on another filesystem than / is not trusted, nor a file
// that is a symlink (its target may live in a directory not watched).
type dirWatch struct {
	mu    sync.Mutex
	fd    int                 // guarded by mu; the inotify descriptor, -1 when not open
	gen   uint64              // guarded by mu; bumped on every event, reset and failure
	cache map[string]stampAt  // guarded by mu
	wds   map[int32]*interest // guarded by mu; what matters in each watched directory
	// root is a directory on the one filesystem trusted to raise an event
	// for every change ("/"; tests use their own); rootDev its device.
	root    string
	rootDev uint64 // guarded by mu
}

// stampDir is a directory a stamp depends on and the names in it that
// matter (nil: every name). Filtering by name keeps a home the agent's
// commands write files in from forgetting the profile's stamp each time.
type stampDir struct {
	path  string
	names []string
}

// interest is what matters in one watched directory, for every stamp that
// watches it.
type interest struct {
	all   bool
	names map[string]bool
}

// stampAt is a stamp and the watch generation it was computed in.
type stampAt struct {
	gen   uint64
	stamp string
}

// watchMask is every event that can change a stamp or a directory's
// listing, including the directory itself being moved or removed.
const watchMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CREATE |
	unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// fileStamps is the process-wide watch: the files it stamps are the
// sandbox's, shared by every Agent of a process.
var fileStamps = &dirWatch{fd: -1, root: "/"}

// stamp returns compute's stamp for key, computing it again only if
// something that matters in dirs may have changed since it last did. dirs
// hold every file compute looks at, each listed after its parent when the
// parent is listed too; a directory that is missing is fine when its
// parent is watched for its name (its creation is an event). compute
// reports whether its stamp may be remembered (false: a symlink).
func (w *dirWatch) stamp(key string, dirs []stampDir, compute func() (string, bool)) string {
	w.mu.Lock()
	gen, ok := w.drainLocked()
	c, hit := w.cache[key]
	if ok && hit && c.gen == gen {
		w.mu.Unlock()
		return c.stamp
	}
	// Watch first (opening the descriptor on first use or after a
	// failure), then take the generation the stamp is computed in: a
	// change after this point bumps it and the stamp is computed again.
	ok = w.watchLocked(dirs)
	gen, ok2 := w.drainLocked()
	w.mu.Unlock()
	s, cacheable := compute()
	if ok && ok2 && cacheable {
		w.mu.Lock()
		if w.cache == nil {
			w.cache = map[string]stampAt{}
		}
		w.cache[key] = stampAt{gen: gen, stamp: s}
		w.mu.Unlock()
	}
	return s
}

// reset forgets everything: /init calls it, because a restored sandbox's
// descriptor and watches come from before the checkpoint.
func (w *dirWatch) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closeLocked()
}

func (w *dirWatch) closeLocked() {
	if w.fd >= 0 {
		unix.Close(w.fd)
	}
	w.fd = -1
	w.gen++
	w.cache = nil
	w.wds = nil
}

// drainLocked reads every pending event and returns the generation, bumped
// if one mattered; ok is false when the watch does not work.
func (w *dirWatch) drainLocked() (gen uint64, ok bool) {
	if w.fd < 0 {
		return w.gen, false
	}
	var buf [4096]byte
	for {
		n, err := unix.Read(w.fd, buf[:])
		switch {
		case n > 0:
			if w.matters(buf[:n]) {
				w.gen++
			}
			continue
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return w.gen, true
		}
		w.closeLocked()
		return w.gen, false
	}
}

// matters reports whether any of the events in b touches what some stamp
// depends on: a name watched for, anything in a directory watched whole,
// a watched directory moved or removed, an unknown watch or lost events.
func (w *dirWatch) matters(b []byte) bool {
	// struct inotify_event: wd, mask, cookie, len, then len bytes of name
	// padded with NULs; decoded field by field (b need not be aligned).
	for len(b) >= unix.SizeofInotifyEvent {
		wd, mask := int32(binary.NativeEndian.Uint32(b[0:4])), binary.NativeEndian.Uint32(b[4:8])
		end := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:16]))
		if end > len(b) {
			return true
		}
		name := strings.TrimRight(string(b[unix.SizeofInotifyEvent:end]), "\x00")
		b = b[end:]
		in := w.wds[wd]
		switch {
		case mask&(unix.IN_Q_OVERFLOW|unix.IN_IGNORED) != 0 || in == nil:
			return true
		case name == "": // the directory itself: gone, or (watched whole) changed
			if mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 || in.all {
				return true
			}
		case in.all || in.names[name]:
			return true
		}
	}
	return len(b) > 0
}

// watchLocked opens the descriptor if needed and watches dirs, reporting
// whether a change to any file in them is sure to be seen.
func (w *dirWatch) watchLocked(dirs []stampDir) bool {
	if w.fd < 0 {
		fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			return false
		}
		var st unix.Stat_t
		if err := unix.Stat(w.root, &st); err != nil {
			unix.Close(fd)
			return false
		}
		w.fd, w.rootDev = fd, st.Dev
	}
	watched := map[string]*interest{}
	for _, d := range dirs {
		var st unix.Stat_t
		if err := unix.Stat(d.path, &st); err != nil {
			if p := watched[filepath.Dir(d.path)]; errors.Is(err, unix.ENOENT) && p != nil && (p.all || p.names[filepath.Base(d.path)]) {
				continue
			}
			return false
		}
		if st.Dev != w.rootDev {
			return false
		}
		wd, err := unix.InotifyAddWatch(w.fd, d.path, watchMask)
		if err != nil {
			return false
		}
		watched[d.path] = w.interestIn(int32(wd), d.names)
	}
	return true
}

// interestIn adds names (nil: all) to what matters in watch wd.
func (w *dirWatch) interestIn(wd int32, names []string) *interest {
	if w.wds == nil {
		w.wds = map[int32]*interest{}
	}
	in := w.wds[wd]
	if in == nil {
		in = &interest{names: map[string]bool{}}
		w.wds[wd] = in
	}
	in.all = in.all || names == nil
	for _, n := range names {
		in.names[n] = true
	}
	return in
}
