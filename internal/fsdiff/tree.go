package fsdiff

import (
	"path"
	"slices"
)

// Tree is a root filesystem as a sandbox sees it: Upper over Lower.
type Tree struct {
	Upper *Layer
	// Lower is nil for a tree that is its upper layer alone.
	Lower *Lower
}

// Lookup returns the entry at clean absolute path p, nil if p is absent.
func (t Tree) Lookup(p string) (*Entry, error) {
	if e := t.Upper.entries[p]; e != nil {
		return e, nil
	}
	if t.Upper.whiteouts[p] || t.hidden(p) {
		return nil, nil
	}
	return t.Lower.Lookup(p)
}

// hidden reports whether the upper layer hides lower path p: one of its
// directories is deleted, replaced by a non-directory or opaque.
func (t Tree) hidden(p string) bool {
	for d := path.Dir(p); ; d = path.Dir(d) {
		if d == "/" {
			return false
		}
		if t.Upper.whiteouts[d] || t.Upper.opaque[d] {
			return true
		}
		if e := t.Upper.entries[d]; e != nil && e.Type != TypeDir {
			return true
		}
	}
}

// touched adds every path whose entry the upper layer may change to set:
// its own paths and the lower paths it hides.
func (t Tree) touched(set map[string]struct{}) error {
	hide := func(p string) error {
		return t.Lower.Walk(p, func(q string) error { set[q] = struct{}{}; return nil })
	}
	for p, e := range t.Upper.entries {
		set[p] = struct{}{}
		if t.Upper.opaque[p] || e.Type != TypeDir {
			if err := hide(p); err != nil {
				return err
			}
		}
	}
	for p := range t.Upper.whiteouts {
		set[p] = struct{}{}
		if err := hide(p); err != nil {
			return err
		}
	}
	return nil
}

// paths returns every path of the tree, sorted: the lower's listing (kept
// per template: templates never change) merged with the upper's paths.
func (t Tree) paths() ([]string, error) {
	lower, err := t.Lower.listing()
	if err != nil {
		return nil, err
	}
	upper := sortedKeys(t.Upper.entries)
	return mergeSorted(lower, upper), nil
}

// mergeSorted merges two sorted lists, dropping duplicates.
func mergeSorted(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var p string
		switch {
		case j == len(b) || i < len(a) && a[i] < b[j]:
			p, i = a[i], i+1
		case i == len(a) || b[j] < a[i]:
			p, j = b[j], j+1
		default:
			p, i, j = a[i], i+1, j+1
		}
		if n := len(out); n == 0 || out[n-1] != p {
			out = append(out, p)
		}
	}
	return out
}

// sameLower reports whether a and b sit on the same lower tree.
func sameLower(a, b Tree) bool {
	if a.Lower == nil || b.Lower == nil {
		return a.Lower == nil && b.Lower == nil
	}
	return a.Lower.dir == b.Lower.dir
}

// candidates are the sorted paths where a and b may differ.
func candidates(a, b Tree) ([]string, error) {
	if !sameLower(a, b) {
		pa, err := a.paths()
		if err != nil {
			return nil, err
		}
		pb, err := b.paths()
		if err != nil {
			return nil, err
		}
		return mergeSorted(pa, pb), nil
	}
	set := map[string]struct{}{}
	err := a.touched(set)
	if err == nil {
		err = b.touched(set)
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}
