package fsdiff

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// Change kinds.
const (
	Added    = "added"
	Modified = "modified"
	Deleted  = "deleted"
)

// Change is one path that differs between two trees.
type Change struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	// What lists the aspects a modification changed (content, mode,
	// owner, link, xattrs, type).
	What []string `json:"what,omitempty"`
	// Old is the entry in the tree diffed against, New the one in the
	// tree diffed; nil where absent.
	Old *Entry `json:"old,omitempty"`
	New *Entry `json:"new,omitempty"`
}

// DefaultExcludes are left out of every diff unless Options.NoDefaults:
// kernel and device trees, per-boot sockets and the volumes' attach point
// (a volume is shared storage, not the sandbox's files), never a user's work.
var DefaultExcludes = []string{"/proc", "/sys", "/dev", "/tmp/.X11-unix", "/.forkbox-volumes"}

// Options select and page a diff.
type Options struct {
	// Include, if set, keeps only paths matching one of these globs (or
	// below a directory matching one); Exclude drops matching paths.
	Include, Exclude []string
	// NoDefaults drops DefaultExcludes.
	NoDefaults bool
	// After is the cursor: only paths sorting after it are listed.
	After string
	// Limit caps the changes of one page (0: DefaultLimit).
	Limit int
}

// Paging bounds.
const (
	DefaultLimit = 1000
	MaxLimit     = 10000
)

// Page is one page of a diff. Next is the cursor of the next page, ""
// after the last.
type Page struct {
	Changes []Change `json:"changes"`
	Next    string   `json:"next,omitempty"`
}

// Validate checks o's globs and limit.
func (o Options) Validate() error {
	for _, g := range append(append([]string{}, o.Include...), o.Exclude...) {
		if !strings.HasPrefix(g, "/") {
			return fmt.Errorf("path pattern %q must be absolute", g)
		}
		if _, ok := CleanPath(g); !ok {
			return fmt.Errorf("path pattern %q escapes the root", g)
		}
		if _, err := path.Match(g, "/"); err != nil {
			return fmt.Errorf("path pattern %q: %w", g, err)
		}
	}
	if o.Limit < 0 || o.Limit > MaxLimit {
		return fmt.Errorf("limit %d: want 0..%d", o.Limit, MaxLimit)
	}
	return nil
}

// matcher matches paths against globs: a path matches when it or one of
// its directories does. Globs without wildcards are prefix tests.
type matcher struct {
	exact []string
	globs []string
}

func newMatcher(globs ...[]string) matcher {
	var m matcher
	for _, list := range globs {
		for _, g := range list {
			g = path.Clean(g)
			if strings.ContainsAny(g, `*?[\`) {
				m.globs = append(m.globs, g)
			} else {
				m.exact = append(m.exact, g)
			}
		}
	}
	return m
}

func (m matcher) empty() bool { return len(m.exact)+len(m.globs) == 0 }

func (m matcher) match(p string) bool {
	for _, g := range m.exact {
		if g == "/" || p == g || strings.HasPrefix(p, g) && p[len(g)] == '/' {
			return true
		}
	}
	if len(m.globs) == 0 {
		return false
	}
	for q := p; ; q = path.Dir(q) {
		for _, g := range m.globs {
			if ok, _ := path.Match(g, q); ok {
				return true
			}
		}
		if q == "/" {
			return false
		}
	}
}

// filter is Options' path selection, compiled.
type filter struct{ include, exclude matcher }

func (o Options) filter() filter {
	f := filter{include: newMatcher(o.Include), exclude: newMatcher(o.Exclude)}
	if !o.NoDefaults {
		f.exclude = newMatcher(o.Exclude, DefaultExcludes)
	}
	return f
}

func (f filter) keep(p string) bool {
	if !f.include.empty() && !f.include.match(p) {
		return false
	}
	return !f.exclude.match(p)
}

// Diff lists how tree b differs from tree a, one page at a time: only
// the page's entries are compared and hashed, whatever the trees' sizes.
func Diff(a, b Tree, o Options) (Page, error) {
	if err := o.Validate(); err != nil {
		return Page{}, err
	}
	limit := o.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	paths, err := candidates(a, b)
	if err != nil {
		return Page{}, err
	}
	i := sort.SearchStrings(paths, o.After)
	if i < len(paths) && paths[i] == o.After {
		i++
	}
	var page Page
	keep := o.filter()
	for ; i < len(paths); i++ {
		p := paths[i]
		if !keep.keep(p) {
			continue
		}
		c, err := Compare(a, b, p)
		if err != nil {
			return Page{}, fmt.Errorf("compare %s: %w", p, err)
		}
		if c == nil {
			continue
		}
		// A page ends at the first change past the limit, so the last
		// page says so instead of sending the client to an empty one.
		if len(page.Changes) == limit {
			page.Next = page.Changes[limit-1].Path
			break
		}
		page.Changes = append(page.Changes, *c)
	}
	return page, nil
}

// Compare returns how p differs from a to b, nil if it does not.
func Compare(a, b Tree, p string) (*Change, error) {
	ea, err := a.Lookup(p)
	if err != nil {
		return nil, err
	}
	eb, err := b.Lookup(p)
	if err != nil {
		return nil, err
	}
	c := &Change{Path: p, Old: ea, New: eb}
	switch {
	case ea == nil && eb == nil:
		return nil, nil
	case ea == nil:
		c.Kind = Added
	case eb == nil:
		c.Kind = Deleted
	default:
		what, err := differs(ea, eb)
		if err != nil || len(what) == 0 {
			return nil, err
		}
		c.Kind, c.What = Modified, what
	}
	return c, c.hashes()
}

// hashes fills the content hashes an answer shows.
func (c *Change) hashes() error {
	for _, e := range []*Entry{c.Old, c.New} {
		if e != nil {
			if _, err := e.hash(); err != nil {
				return err
			}
		}
	}
	return nil
}
