package fsdiff

import (
	"slices"
	"sync"
)

// listings keeps the sorted path lists of the last few lower trees walked
// whole (diffs across templates page through them): templates never
// change, so a listing stays right.
var listings struct {
	mu    sync.Mutex
	order []string
	m     map[string][]string
}

const maxListings = 2

// listing returns every path of the lower tree, sorted.
func (lw *Lower) listing() ([]string, error) {
	if lw == nil {
		return nil, nil
	}
	listings.mu.Lock()
	l, ok := listings.m[lw.dir]
	listings.mu.Unlock()
	if ok {
		return l, nil
	}
	var out []string
	if err := lw.Walk("/", func(p string) error { out = append(out, p); return nil }); err != nil {
		return nil, err
	}
	slices.Sort(out) // WalkDir's order is by name per directory, not by path
	listings.mu.Lock()
	defer listings.mu.Unlock()
	if listings.m == nil {
		listings.m = map[string][]string{}
	}
	if _, ok := listings.m[lw.dir]; !ok {
		listings.m[lw.dir] = out
		listings.order = append(listings.order, lw.dir)
		if len(listings.order) > maxListings {
			delete(listings.m, listings.order[0])
			listings.order = listings.order[1:]
		}
	}
	return out, nil
}
