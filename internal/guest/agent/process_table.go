package agent

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"

	"connectrpc.com/connect"

	pb "github.com/forkbox/forkbox/api/gen/process"
)

// processTable indexes running processes by pid. A process leaves the table
// once its end event has been published, so Connect on a finished process
// answers not_found as envd does.
type processTable struct {
	mu    sync.Mutex
	byPID map[uint32]*managedProc // guarded by mu
}

func newProcessTable() *processTable {
	return &processTable{byPID: map[uint32]*managedProc{}}
}

// tagInUse reports whether a running process already has tag, so Start
// can refuse a duplicate and selecting by tag stays unambiguous.
func (t *processTable) tagInUse(tag string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, q := range t.byPID {
		if q.tag != nil && *q.tag == tag {
			return true
		}
	}
	return false
}

// add registers a started process.
func (t *processTable) add(p *managedProc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byPID[p.pid] = p
}

// remove drops p from the table.
func (t *processTable) remove(p *managedProc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byPID[p.pid] == p {
		delete(t.byPID, p.pid)
	}
}

// find resolves a selector to a running process.
func (t *processTable) find(sel *pb.ProcessSelector) (*managedProc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch s := sel.GetSelector().(type) {
	case *pb.ProcessSelector_Pid:
		if p, ok := t.byPID[s.Pid]; ok {
			return p, nil
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", s.Pid))
	case *pb.ProcessSelector_Tag:
		for _, p := range t.byPID {
			if p.tag != nil && *p.tag == s.Tag {
				return p, nil
			}
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %q not found", s.Tag))
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("process selector (pid or tag) is required"))
	}
}

// list returns all running processes ordered by pid.
func (t *processTable) list() []*pb.ProcessInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*pb.ProcessInfo, 0, len(t.byPID))
	for _, p := range t.byPID {
		out = append(out, p.info())
	}
	slices.SortFunc(out, func(a, b *pb.ProcessInfo) int { return cmp.Compare(a.Pid, b.Pid) })
	return out
}
