package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"connectrpc.com/connect"
	"github.com/fsnotify/fsnotify"

	fspb "github.com/forkbox/forkbox/api/gen/filesystem"
)

// dirWatcher turns inotify events below one directory into FilesystemEvents.
// inotify watches single directories, so a recursive watcher adds every
// subdirectory, including ones created while it runs.
type dirWatcher struct {
	acct         *account // whose rights directories are watched and described with
	root         string
	recursive    bool
	includeEntry bool
	w            *fsnotify.Watcher
	emit         func(*fspb.FilesystemEvent)
	log          *slog.Logger
	done         chan struct{}
}

// watchDir starts watching root (which must be a directory) with acct's
// rights; emit is called from the watcher's goroutine for every event until
// close.
func watchDir(acct *account, root string, recursive, includeEntry bool, log *slog.Logger, emit func(*fspb.FilesystemEvent)) (*dirWatcher, error) {
	var fi os.FileInfo
	err := asAccount(acct, func() (err error) { fi, err = os.Stat(root); return err })
	if err != nil {
		return nil, fsError(err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a directory", root))
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	dw := &dirWatcher{acct: acct, root: root, recursive: recursive, includeEntry: includeEntry,
		w: w, emit: emit, log: log, done: make(chan struct{})}
	if err := dw.add(root); err != nil {
		w.Close()
		return nil, fsError(err)
	}
	go dw.loop()
	return dw, nil
}

// add watches dir and, when recursive, every directory below it (those the
// user may read).
func (dw *dirWatcher) add(dir string) error {
	return asAccount(dw.acct, func() error { return dw.addAll(dir) })
}

func (dw *dirWatcher) addAll(dir string) error {
	if !dw.recursive {
		return dw.w.Add(dir)
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // skip unreadable subtrees rather than failing
		}
		if d.IsDir() {
			if err := dw.w.Add(p); err != nil && p == dir {
				return err
			}
		}
		return nil
	})
}

func (dw *dirWatcher) loop() {
	defer close(dw.done)
	for {
		select {
		case ev, ok := <-dw.w.Events:
			if !ok {
				return
			}
			dw.handle(ev)
		case err, ok := <-dw.w.Errors:
			if !ok {
				return
			}
			dw.log.Warn("watch error", "root", dw.root, "err", err)
		}
	}
}

// opTypes pairs fsnotify operations with the proto's event types; one
// inotify event can carry several operations.
var opTypes = []struct {
	op  fsnotify.Op
	typ fspb.EventType
}{
	{fsnotify.Create, fspb.EventType_EVENT_TYPE_CREATE},
	{fsnotify.Write, fspb.EventType_EVENT_TYPE_WRITE},
	{fsnotify.Remove, fspb.EventType_EVENT_TYPE_REMOVE},
	{fsnotify.Rename, fspb.EventType_EVENT_TYPE_RENAME},
	{fsnotify.Chmod, fspb.EventType_EVENT_TYPE_CHMOD},
}

// handle converts one fsnotify event (names are relative to the root).
func (dw *dirWatcher) handle(ev fsnotify.Event) {
	rel, err := filepath.Rel(dw.root, ev.Name)
	if err != nil {
		rel = ev.Name
	}
	if dw.recursive && ev.Has(fsnotify.Create) {
		if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
			_ = dw.add(ev.Name)
		}
	}
	for _, ot := range opTypes {
		if !ev.Has(ot.op) {
			continue
		}
		fe := &fspb.FilesystemEvent{Name: rel, Type: ot.typ}
		if dw.includeEntry && ot.op != fsnotify.Remove && ot.op != fsnotify.Rename {
			_ = asAccount(dw.acct, func() (err error) { fe.Entry, err = entryInfo(ev.Name); return err })
		}
		dw.emit(fe)
	}
}

// close stops the watcher and waits until emit will not be called again.
func (dw *dirWatcher) close() {
	if err := dw.w.Close(); err != nil && !errors.Is(err, fsnotify.ErrClosed) {
		dw.log.Debug("closing watcher", "err", err)
	}
	<-dw.done
}
