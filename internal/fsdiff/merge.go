package fsdiff

import (
	"fmt"
	"strings"
)

// Merge strategies for paths both sides changed differently.
const (
	// StrategyNone leaves conflicts untouched and lists them.
	StrategyNone = ""
	// StrategyTheirs takes the other side's version.
	StrategyTheirs = "theirs"
	// StrategyOurs keeps the target's version (listed, not applied).
	StrategyOurs = "ours"
)

// Conflict is a path base→from and base→target changed differently.
type Conflict struct {
	Path string `json:"path"`
	// Base, Theirs (from) and Ours (target): nil where absent.
	Base   *Entry `json:"base,omitempty"`
	Theirs *Entry `json:"theirs,omitempty"`
	Ours   *Entry `json:"ours,omitempty"`
	// Resolved is the strategy that settled it ("" if left as it was).
	Resolved string `json:"resolved,omitempty"`
}

// Plan is what a three-way merge of from into target does.
type Plan struct {
	// Take are the changes (base→from) to write into target.
	Take []Change
	// Conflicts are the paths changed on both sides differently.
	Conflicts []Conflict
	// Same counts paths target already has as from has them.
	Same int
	// left are the conflicts left as they are, in path order.
	left []string
}

// MaxMergeChanges bounds the changes one merge holds at once: a bigger
// change set is refused (narrow it with paths) rather than held in memory.
const MaxMergeChanges = 200000

// Merge plans bringing the changes of from since base into target:
// changes on one side only are taken, a path both changed to the same
// entry is left, one changed differently is a conflict settled by
// strategy. o selects paths (its paging fields are ignored).
func Merge(base, from, target Tree, o Options, strategy string) (Plan, error) {
	switch strategy {
	case StrategyNone, StrategyTheirs, StrategyOurs:
	default:
		return Plan{}, fmt.Errorf("strategy %q: want theirs or ours", strategy)
	}
	var plan Plan
	o.After, o.Limit = "", MaxLimit
	for {
		page, err := Diff(base, from, o)
		if err != nil {
			return Plan{}, err
		}
		for _, c := range page.Changes {
			if err := plan.add(target, c, strategy); err != nil {
				return Plan{}, err
			}
		}
		if len(plan.Take)+len(plan.Conflicts) > MaxMergeChanges {
			return Plan{}, fmt.Errorf("more than %d changes to merge: narrow them with paths", MaxMergeChanges)
		}
		if page.Next == "" {
			return plan, nil
		}
		o.After = page.Next
	}
}

func (p *Plan) add(target Tree, c Change, strategy string) error {
	te, err := target.Lookup(c.Path)
	if err != nil {
		return err
	}
	// Below a conflict left as it is, nothing can be taken either: the
	// directory it would go into is the target's, not from's.
	if p.underLeftConflict(c.Path) {
		p.Conflicts = append(p.Conflicts, Conflict{Path: c.Path, Base: c.Old, Theirs: c.New, Ours: te, Resolved: strategy})
		return nil
	}
	if same, err := Equal(te, c.New); err != nil || same {
		p.Same++
		return err
	}
	if same, err := Equal(te, c.Old); err != nil || same {
		p.Take = append(p.Take, c)
		return err
	}
	if te != nil {
		if _, err := te.hash(); err != nil {
			return err
		}
	}
	cf := Conflict{Path: c.Path, Base: c.Old, Theirs: c.New, Ours: te, Resolved: strategy}
	p.Conflicts = append(p.Conflicts, cf)
	if strategy == StrategyTheirs {
		c.Old = te
		p.Take = append(p.Take, c)
	} else {
		p.left = append(p.left, c.Path)
	}
	return nil
}

// underLeftConflict reports whether a conflict left as it is holds path.
// Changes come in path order, so the conflicts holding path are the last
// ones left.
func (p *Plan) underLeftConflict(path string) bool {
	for i := len(p.left) - 1; i >= 0; i-- {
		if l := p.left[i]; strings.HasPrefix(path, l) && len(path) > len(l) && path[len(l)] == '/' {
			return true
		}
	}
	return false
}
