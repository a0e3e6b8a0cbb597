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
// its builds; the store keeps which node that is and the record without
// its logs (store.BuildRecord). Every other node lists the record from
// there and forwards the template's requests home (the server asks Home);
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
	return s.cfg.Store.PutBuildRecord(ctx, &store.BuildRecord{ID: r.ID, Name: r.Names[0], Node: s.cfg.NodeID, Data: data})
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
		out = append(out, &r)
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
