package build

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// This file is the build records of a cluster (Config.NodeID set). Each
// record has a home node, the one that holds its uploaded files and runs
// its builds; the store keeps which node that is, the record without its
// logs, and apart the tail of each build's log (store.BuildRecord,
// sharedLogTails). Every other node lists the record from there and
// forwards the template's requests home (the server asks Home);
// a record whose home died is taken over by the first node that needs it
// (Adopt). A single daemon keeps its records in its data dir alone.

// shared reports whether the records are a cluster's.
func (s *Service) shared() bool { return s.cfg.NodeID != "" }

// Clustered reports whether the records are a cluster's (Config.NodeID):
// only then do template requests go to another node.
func (s *Service) Clustered() bool { return s.shared() }

// putHomeLocked writes r's row in the store; s.mu held. A record another
// node took over is ErrConflict, a name another record has
// ErrAlreadyExists.
func (s *Service) putHomeLocked(ctx context.Context, r *Record) error {
	if !s.shared() || len(r.Names) == 0 {
		return nil
	}
	data, err := json.Marshal(cloneRecord(r))
	if err != nil {
		return err
	}
	logs, err := json.Marshal(sharedLogTails(r))
	if err != nil {
		return err
	}
	return s.cfg.Store.PutBuildRecord(ctx, &store.BuildRecord{ID: r.ID, Name: r.Names[0], Node: s.cfg.NodeID, Data: data, Logs: logs})
}

// sharedLogs is how many of a build's last log entries its record in the
// store keeps: what a node that adopts the record (Adopt) still shows of
// the builds its dead home ran, and why the last one failed.
const sharedLogs = 500

// sharedLogTails are the tails of r's builds' logs as the store keeps
// them, by build id, beside the record. The home writes them when a build
// starts, as its log grows (checkpointLocked) and when it ends.
func sharedLogTails(r *Record) map[string][]LogEntry {
	out := make(map[string][]LogEntry, len(r.Builds))
	for _, b := range r.Builds {
		out[b.ID] = b.Logs[max(0, len(b.Logs)-sharedLogs):]
	}
	return out
}

// withLogTails gives r's builds the log tails stored with its record. A
// record written before they were stored apart has them in its data.
func (s *Service) withLogTails(ctx context.Context, r *Record) error {
	raw, err := s.cfg.Store.BuildRecordLogs(ctx, r.ID)
	if err != nil || raw == nil {
		return err
	}
	var tails map[string][]LogEntry
	if err := json.Unmarshal(raw, &tails); err != nil {
		return fmt.Errorf("template %s's build logs: %v: %w", r.ID, err, errdefs.ErrInternal)
	}
	for _, b := range r.Builds {
		if l, ok := tails[b.ID]; ok {
			b.Logs = l
		}
	}
	return nil
}

// ckpt is when a template's record was last written to the store during
// a build, and at which step.
type ckpt struct {
	at   time.Time
	step string
}

// checkpointLocked writes r's record to the store, s.mu held, when the
// build's log just entered a new step or a second has passed since the
// last write: the log of a build in progress survives its node (Adopt)
// up to the step it was in, at a bounded cost in writes.
func (s *Service) checkpointLocked(r *Record, e LogEntry) {
	if !s.shared() {
		return
	}
	last := s.ckpts[r.ID]
	if e.Step == last.step && e.Timestamp.Sub(last.at) < time.Second {
		return
	}
	s.ckpts[r.ID] = ckpt{at: e.Timestamp, step: e.Step}
	if err := s.putHomeLocked(context.Background(), r); err != nil {
		s.log.Warn("checkpoint a template build's record", "template", r.ID, "err", err)
	}
}

// Home returns the node holding the record of template ref (id, name or
// name:tag) when that is another node; "" when it is this one or no node
// has one (a new name: whichever node is asked creates it).
func (s *Service) Home(ctx context.Context, ref string) (string, error) {
	if !s.shared() {
		return "", nil
	}
	s.mu.Lock()
	local := s.byNameLocked(ref) != nil
	s.mu.Unlock()
	if local {
		return "", nil
	}
	row, err := s.cfg.Store.GetBuildRecord(ctx, nameOf(ref))
	switch {
	case errdefs.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", err
	case row.Node == s.cfg.NodeID:
		return "", nil
	}
	return row.Node, nil
}

// nameOf is ref without its tag.
func nameOf(ref string) string {
	name, _, _ := strings.Cut(ref, ":")
	return name
}

// Adopt makes this node the home of template ref's record, which node
// from held until it died: its builds in progress failed with it, and its
// uploads are gone with its disk (Files asks for them again).
func (s *Service) Adopt(ctx context.Context, ref, from string) error {
	row, err := s.cfg.Store.GetBuildRecord(ctx, nameOf(ref))
	if err != nil {
		return err
	}
	row, err = s.cfg.Store.MoveBuildRecord(ctx, row.ID, from, s.cfg.NodeID)
	if err != nil {
		return err
	}
	var r Record
	if err := json.Unmarshal(row.Data, &r); err != nil {
		return fmt.Errorf("template %s's record: %v: %w", row.ID, err, errdefs.ErrInternal)
	}
	if err := s.withLogTails(ctx, &r); err != nil {
		return err
	}
	for _, b := range r.Builds {
		if b.Status == StatusBuilding || b.Status == StatusWaiting {
			b.Status, b.FinishedAt = StatusError, time.Now().UTC()
			b.Reason = &Reason{Message: fmt.Sprintf("the build was interrupted: node %s, which ran it, died", from)}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[r.ID] = &r
	if err := s.content.Set(ctx, templateHolder(r.ID), heldRefs(&r)); err != nil {
		s.log.Error("hold an adopted template's content", "template", r.ID, "err", err)
	}
	s.log.Warn("template record taken over from a dead node", "template", r.ID, "names", r.Names, "from", from)
	return s.saveLocked(&r)
}

// othersRecords returns the records other nodes hold, for List.
func (s *Service) othersRecords(ctx context.Context) []*Record {
	if !s.shared() {
		return nil
	}
	rows, err := s.cfg.Store.ListBuildRecords(ctx)
	if err != nil {
		s.log.Warn("list other nodes' template records", "err", err)
		return nil
	}
	var out []*Record
	for _, row := range rows {
		var r Record
		if row.Node == s.cfg.NodeID || json.Unmarshal(row.Data, &r) != nil {
			continue
		}
		out = append(out, cloneRecord(&r)) // a list shows no logs (one written before they were apart has them)
	}
	return out
}

// claimLoaded writes the rows of the records loaded at start. One another
// node took over while this one was away is no longer this node's: its
// file and uploads go.
func (s *Service) claimLoaded(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, r := range s.records {
		err := s.putHomeLocked(ctx, r)
		switch {
		case errdefs.IsConflict(err):
			s.log.Warn("template record was taken over by another node; dropping this node's copy", "template", id)
			delete(s.records, id)
			os.Remove(filepath.Join(s.cfg.Dir, "records", id+".json"))
			s.cfg.Uploads.Remove(id)
		case err != nil:
			s.log.Error("record template's home", "template", id, "err", err)
		}
	}
}
