package sandbox

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/sync/errgroup"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/fsdiff"
)

// DiffOptions select a diff of a sandbox or snapshot.
type DiffOptions struct {
	// Against is the sandbox, snapshot or template diffed against; empty:
	// the parent in the lineage (the snapshot rolled back to or started
	// from, or the template).
	Against string
	fsdiff.Options
}

// Diff is one page of the changes from Against to ID.
type Diff struct {
	ID      string `json:"id"`
	Against string `json:"against"`
	fsdiff.Page
}

// Diff lists the filesystem changes of sandbox or snapshot id since
// o.Against, a page at a time. A running sandbox's files are read from
// its upper layer as it is now (runtime.UpperLayerWriter: its writers
// wait while the layer is written, nothing stops), a paused sandbox's and
// a snapshot's from the file list kept in their image. Ids of unrelated
// lineages are compared as whole trees.
func (m *Manager) Diff(ctx context.Context, id string, o DiffOptions) (*Diff, error) {
	var d *Diff
	err := m.withDiff(ctx, id, o, func(a, b *openedTree, against string) error {
		page, err := fsdiff.Diff(a.Tree, b.Tree, o.Options)
		d = &Diff{ID: id, Against: against, Page: page}
		return err
	})
	return d, err
}

// DiffPatch writes the page Diff would list as a unified diff (text
// files as hunks, binary ones named) and returns the next page's cursor.
func (m *Manager) DiffPatch(ctx context.Context, id string, o DiffOptions, w io.Writer) (string, error) {
	var next string
	err := m.withDiff(ctx, id, o, func(a, b *openedTree, _ string) error {
		page, err := fsdiff.Diff(a.Tree, b.Tree, o.Options)
		if err != nil {
			return err
		}
		for _, c := range page.Changes {
			if err := fsdiff.WritePatch(w, c); err != nil {
				return err
			}
		}
		next = page.Next
		return nil
	})
	return next, err
}

// withDiff opens id's tree and against's (defaulted) and calls fn.
func (m *Manager) withDiff(ctx context.Context, id string, o DiffOptions, fn func(a, b *openedTree, against string) error) error {
	if err := o.Options.Validate(); err != nil {
		return fmt.Errorf("diff: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	against := o.Against
	if against == "" {
		h, err := m.loadHistory(ctx)
		if err != nil {
			return err
		}
		if _, err := m.openableID(ctx, id); err != nil {
			return err
		}
		if against, err = h.defaultAgainst(id); err != nil {
			return err
		}
	}
	start := m.now()
	var a, b *openedTree
	var g errgroup.Group
	g.Go(func() (err error) { b, err = m.openTree(ctx, id); return err })
	g.Go(func() (err error) { a, err = m.openTree(ctx, against); return err })
	err := g.Wait()
	defer a.Close()
	defer b.Close()
	if err != nil {
		return err
	}
	read := m.now()
	if err := fn(a, b, against); err != nil {
		return fmt.Errorf("diff %s against %s: %w", id, against, err)
	}
	m.log.Debug("diff", "id", id, "against", against, "read", read.Sub(start), "took", m.now().Sub(start))
	return nil
}

// openableID checks that id names a sandbox or snapshot (ErrNotFound).
func (m *Manager) openableID(ctx context.Context, id string) (string, error) {
	if _, err := m.st.GetSandbox(ctx, id); err == nil {
		return "sandbox", nil
	}
	if t, err := m.st.GetTemplate(ctx, id); err == nil {
		return string(t.Kind), nil
	}
	return "", fmt.Errorf("%q is no sandbox or snapshot: %w", id, errdefs.ErrNotFound)
}
