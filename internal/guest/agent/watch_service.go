package agent

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	fspb "github.com/forkbox/forkbox/api/gen/filesystem"
)

// maxPolledEvents bounds the events kept for a polling watcher nobody polls;
// the oldest are dropped first.
const maxPolledEvents = 10000

// WatchDir streams changes below a directory: a start event once the watch
// is in place (so the client knows later changes will be seen), then events,
// with keepalives while idle.
func (s *filesystemService) WatchDir(ctx context.Context, req *connect.Request[fspb.WatchDirRequest], stream *connect.ServerStream[fspb.WatchDirResponse]) error {
	p, acct, err := s.pathFor(req, req.Msg.GetPath())
	if err != nil {
		return err
	}
	events := make(chan *fspb.FilesystemEvent, 1024)
	// stop unblocks the watcher's emit when this handler returns for any
	// reason, so dw.close never waits on a send nobody will receive.
	stop := make(chan struct{})
	dw, err := watchDir(acct, p, req.Msg.GetRecursive(), req.Msg.GetIncludeEntry(), s.a.log, func(ev *fspb.FilesystemEvent) {
		select {
		case events <- ev:
		case <-stop:
		}
	})
	if err != nil {
		return err
	}
	defer dw.close()
	defer close(stop) // runs before dw.close
	start := &fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Start{Start: &fspb.WatchDirResponse_StartEvent{}}}
	if err := stream.Send(start); err != nil {
		return err
	}
	keepalive := keepaliveInterval(req.Header())
	ticker := time.NewTicker(keepalive)
	defer ticker.Stop()
	for {
		var msg *fspb.WatchDirResponse
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
			msg = &fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Keepalive{Keepalive: &fspb.WatchDirResponse_KeepAlive{}}}
		case ev := <-events:
			msg = &fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Filesystem{Filesystem: ev}}
			ticker.Reset(keepalive)
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
}

// pollWatcher buffers a dirWatcher's events until the client polls.
type pollWatcher struct {
	dw     *dirWatcher
	mu     sync.Mutex
	events []*fspb.FilesystemEvent // guarded by mu
}

// watcherTable holds the polling watchers by id.
type watcherTable struct {
	mu   sync.Mutex
	byID map[string]*pollWatcher // guarded by mu
}

func newWatcherTable() *watcherTable {
	return &watcherTable{byID: map[string]*pollWatcher{}}
}

// CreateWatcher starts a polling watcher and returns its id.
func (s *filesystemService) CreateWatcher(ctx context.Context, req *connect.Request[fspb.CreateWatcherRequest]) (*connect.Response[fspb.CreateWatcherResponse], error) {
	p, acct, err := s.pathFor(req, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	pw := &pollWatcher{}
	dw, err := watchDir(acct, p, req.Msg.GetRecursive(), req.Msg.GetIncludeEntry(), s.a.log, func(ev *fspb.FilesystemEvent) {
		pw.mu.Lock()
		defer pw.mu.Unlock()
		if len(pw.events) >= maxPolledEvents {
			pw.events = pw.events[1:]
		}
		pw.events = append(pw.events, ev)
	})
	if err != nil {
		return nil, err
	}
	pw.dw = dw
	id := rand.Text()
	t := s.a.watches
	t.mu.Lock()
	t.byID[id] = pw
	t.mu.Unlock()
	return connect.NewResponse(&fspb.CreateWatcherResponse{WatcherId: id}), nil
}

// GetWatcherEvents returns and forgets the events seen since the last poll.
func (s *filesystemService) GetWatcherEvents(ctx context.Context, req *connect.Request[fspb.GetWatcherEventsRequest]) (*connect.Response[fspb.GetWatcherEventsResponse], error) {
	pw, err := s.a.watches.get(req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	pw.mu.Lock()
	evs := pw.events
	pw.events = nil
	pw.mu.Unlock()
	return connect.NewResponse(&fspb.GetWatcherEventsResponse{Events: evs}), nil
}

// RemoveWatcher stops a polling watcher.
func (s *filesystemService) RemoveWatcher(ctx context.Context, req *connect.Request[fspb.RemoveWatcherRequest]) (*connect.Response[fspb.RemoveWatcherResponse], error) {
	t := s.a.watches
	id := req.Msg.GetWatcherId()
	pw, err := t.get(id)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	delete(t.byID, id)
	t.mu.Unlock()
	pw.dw.close()
	return connect.NewResponse(&fspb.RemoveWatcherResponse{}), nil
}

// get finds a polling watcher.
func (t *watcherTable) get(id string) (*pollWatcher, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pw, ok := t.byID[id]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher %q not found", id))
	}
	return pw, nil
}
