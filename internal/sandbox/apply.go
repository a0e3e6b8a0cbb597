package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/fsdiff"
)

// ApplyOptions describe an apply: the file changes of From since Base
// brought into a running sandbox.
type ApplyOptions struct {
	// From is the sandbox or snapshot whose changes are taken.
	From string
	// Base is what From's changes are counted from; empty: the nearest
	// state From and the target both derive from (lineage).
	Base string
	// Paths, if set, limit the apply to these paths (globs; a directory
	// covers what it holds).
	Paths []string
	// Strategy settles paths both sides changed differently:
	// fsdiff.StrategyTheirs takes From's, StrategyOurs keeps the
	// target's; by default they are left as they are and listed.
	Strategy string
	// DryRun plans without writing.
	DryRun bool
}

// ApplyResult is what an apply did.
type ApplyResult struct {
	ID   string `json:"id"`
	From string `json:"from"`
	Base string `json:"base"`
	// Applied are the changes written into the sandbox.
	Applied []fsdiff.Change `json:"applied"`
	// Conflicts are the paths both sides changed differently.
	Conflicts []fsdiff.Conflict `json:"conflicts"`
	// Unchanged counts the paths the sandbox already had as From has them.
	Unchanged int  `json:"unchanged"`
	DryRun    bool `json:"dryRun,omitempty"`
	// TookMs is the apply's duration in milliseconds.
	TookMs int64 `json:"tookMs"`
}

// agentApplyPath is the agent's route that applies a change set (the
// fsdiff wire format) all or nothing.
const agentApplyPath = "/forkbox/apply"

// Apply brings the file changes of o.From since o.Base into running
// sandbox id as a three-way merge of trees. The agent writes them all or
// none (staged, then moved into place, undone on a failure). Memory and
// processes are not merged. Apply holds the sandbox's claim as a
// snapshot does (it keeps serving; pause, rollback and kill queue).
func (m *Manager) Apply(ctx context.Context, id string, o ApplyOptions) (_ *ApplyResult, err error) {
	start := m.now()
	if err := checkApply(id, o); err != nil {
		return nil, err
	}
	if _, err := m.openableID(ctx, o.From); err != nil {
		return nil, err
	}
	if o.Base == "" {
		h, err := m.loadHistory(ctx)
		if err != nil {
			return nil, err
		}
		if o.Base, err = h.commonAncestor(o.From, id); err != nil {
			return nil, err
		}
	}
	op, err := m.claimWaiting(ctx, id, StateSnapshotting, StateRunning)
	if err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	res, err := m.applyClaimed(ctx, op, o)
	if err != nil {
		return nil, op.fail(ctx, fmt.Errorf("apply %s into %s: %w", o.From, id, err), StateRunning, nil)
	}
	if err := op.done(ctx, StateRunning, nil); err != nil {
		return nil, err
	}
	res.TookMs = m.now().Sub(start).Milliseconds()
	m.log.Info("changes applied", "sandbox", id, "from", o.From, "base", o.Base,
		"applied", len(res.Applied), "conflicts", len(res.Conflicts), "took", m.now().Sub(start))
	return res, nil
}

func checkApply(id string, o ApplyOptions) error {
	if o.From == "" {
		return fmt.Errorf("apply needs from: %w", errdefs.ErrInvalidArgument)
	}
	if o.From == id {
		return fmt.Errorf("apply of %s into itself: %w", id, errdefs.ErrInvalidArgument)
	}
	if o.Base == id {
		// The target changes as it is applied to: it cannot be the base
		// (and reading it would wait on the apply's own claim).
		return fmt.Errorf("base %s is the sandbox applied to: name a snapshot: %w", id, errdefs.ErrInvalidArgument)
	}
	switch o.Strategy {
	case fsdiff.StrategyNone, fsdiff.StrategyTheirs, fsdiff.StrategyOurs:
	default:
		return fmt.Errorf("strategy %q: want theirs or ours: %w", o.Strategy, errdefs.ErrInvalidArgument)
	}
	if err := (fsdiff.Options{Include: o.Paths}).Validate(); err != nil {
		return fmt.Errorf("apply: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	return nil
}

// applyClaimed plans and writes the apply into claimed sandbox op.
func (m *Manager) applyClaimed(ctx context.Context, op *op, o ApplyOptions) (*ApplyResult, error) {
	start := m.now()
	from, base, target, err := m.openApplyTrees(ctx, op, o)
	if err != nil {
		return nil, err
	}
	defer from.Close()
	defer base.Close()
	defer target.Close()
	read := m.now()
	plan, err := fsdiff.Merge(base.Tree, from.Tree, target.Tree, fsdiff.Options{Include: o.Paths}, o.Strategy)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, errdefs.ErrInvalidArgument)
	}
	planned := m.now()
	res := &ApplyResult{ID: op.id(), From: o.From, Base: o.Base, Applied: plan.Take, Conflicts: plan.Conflicts,
		Unchanged: plan.Same, DryRun: o.DryRun}
	if res.Applied == nil {
		res.Applied = []fsdiff.Change{}
	}
	if res.Conflicts == nil {
		res.Conflicts = []fsdiff.Conflict{}
	}
	if !o.DryRun && len(plan.Take) > 0 {
		err = m.sendChanges(ctx, op.id(), op.e.rec.EnvdAccessToken, plan.Take)
	}
	m.log.Debug("apply phases", "sandbox", op.id(), "read", read.Sub(start), "plan", planned.Sub(read), "write", m.now().Sub(planned))
	return res, err
}

// openApplyTrees opens from's, base's and the target's trees at once
// (each may be a running sandbox's upper layer to write).
func (m *Manager) openApplyTrees(ctx context.Context, op *op, o ApplyOptions) (from, base, target *openedTree, err error) {
	var g errgroup.Group
	g.Go(func() (err error) { from, err = m.openTree(ctx, o.From); return err })
	g.Go(func() (err error) { base, err = m.openTree(ctx, o.Base); return err })
	g.Go(func() error {
		layer, err := m.liveLayer(ctx, op.id())
		if err != nil {
			return err
		}
		lower, err := m.lowerOf(ctx, &op.e.rec)
		if err != nil {
			layer.Close()
			return err
		}
		target = &openedTree{Tree: fsdiff.Tree{Upper: layer, Lower: lower}, close: func() { layer.Close() }}
		return nil
	})
	if err := g.Wait(); err != nil {
		from.Close()
		base.Close()
		target.Close()
		return nil, nil, nil, err
	}
	return from, base, target, nil
}

// agentApplyAnswer is the agent's answer to a change set.
type agentApplyAnswer struct {
	Applied int    `json:"applied"`
	Message string `json:"message"`
	// How long the agent staged, moved into place and cleaned up.
	StageMs  int64 `json:"stageMs"`
	CommitMs int64 `json:"commitMs"`
	CleanMs  int64 `json:"cleanMs"`
}

// sendChanges streams changes to sandbox id's agent, which applies them
// all or none.
func (m *Manager) sendChanges(ctx context.Context, id, token string, changes []fsdiff.Change) error {
	pr, pw := io.Pipe()
	go func() {
		// Buffered: the change set is mostly small headers and files, and
		// each write through the pipe is a hand-over to the HTTP client.
		bw := bufio.NewWriterSize(pw, 256<<10)
		_, err := fsdiff.WriteChanges(bw, changes)
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	resp, err := m.agentRequest(ctx, http.MethodPost, id, agentApplyPath, token, pr)
	pr.Close()
	if err != nil {
		return fmt.Errorf("send changes to %s: %w", id, err)
	}
	defer resp.Body.Close()
	var ans agentApplyAnswer
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	json.Unmarshal(b, &ans)
	switch {
	case resp.StatusCode == http.StatusOK:
		m.log.Debug("agent applied", "sandbox", id, "changes", ans.Applied,
			"stage_ms", ans.StageMs, "commit_ms", ans.CommitMs, "clean_ms", ans.CleanMs)
		return nil
	case resp.StatusCode == http.StatusConflict:
		return fmt.Errorf("nothing applied: %s: %w", ans.Message, errdefs.ErrConflict)
	case resp.StatusCode == http.StatusBadRequest:
		return fmt.Errorf("nothing applied: %s: %w", ans.Message, errdefs.ErrInvalidArgument)
	case resp.StatusCode == http.StatusNotFound && ans.Message == "":
		return fmt.Errorf("the agent of %s cannot apply changes (an older agent): %w", id, errdefs.ErrUnavailable)
	default:
		msg := ans.Message
		if msg == "" {
			msg = strings.TrimSpace(string(b))
		}
		return fmt.Errorf("nothing applied: agent answered %s: %s", resp.Status, msg)
	}
}
