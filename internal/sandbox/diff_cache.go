package sandbox

import (
	"slices"
	"sync"

	"github.com/forkbox/forkbox/internal/fsdiff"
)

// layerCacheSize is how many snapshots' file lists stay read: the parents
// an agent diffs its branches against, over and over.
const layerCacheSize = 8

// layerCache keeps the parsed file lists (and the content hashes computed
// so far) of recently diffed snapshots. Snapshots never change, so an
// entry stays right for the snapshot's life; a layer evicted while a
// diff reads it is closed when that diff ends.
type layerCache struct {
	mu    sync.Mutex
	m     map[string]*cachedLayer
	order []string // least recently used first
}

type cachedLayer struct {
	l       *fsdiff.Layer
	users   int
	evicted bool
}

// get returns snapshot id's layer, opening it with open when not cached,
// and the release to call when done with it.
func (c *layerCache) get(id string, open func() (*fsdiff.Layer, error)) (*fsdiff.Layer, func(), error) {
	c.mu.Lock()
	if e, ok := c.m[id]; ok {
		e.users++
		c.touchLocked(id)
		c.mu.Unlock()
		return e.l, c.releaser(e), nil
	}
	c.mu.Unlock()
	l, err := open()
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[id]; ok { // opened meanwhile by another diff
		l.Close()
		e.users++
		return e.l, c.releaser(e), nil
	}
	if c.m == nil {
		c.m = map[string]*cachedLayer{}
	}
	e := &cachedLayer{l: l, users: 1}
	c.m[id] = e
	c.touchLocked(id)
	for len(c.order) > layerCacheSize {
		old := c.order[0]
		c.order = c.order[1:]
		c.evictLocked(old)
	}
	return l, c.releaser(e), nil
}

// drop forgets snapshot id (deleted).
func (c *layerCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order = slices.DeleteFunc(c.order, func(s string) bool { return s == id })
	c.evictLocked(id)
}

func (c *layerCache) touchLocked(id string) {
	c.order = append(slices.DeleteFunc(c.order, func(s string) bool { return s == id }), id)
}

func (c *layerCache) evictLocked(id string) {
	e, ok := c.m[id]
	if !ok {
		return
	}
	delete(c.m, id)
	e.evicted = true
	if e.users == 0 {
		e.l.Close()
	}
}

func (c *layerCache) releaser(e *cachedLayer) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			e.users--
			if e.evicted && e.users == 0 {
				e.l.Close()
			}
		})
	}
}
