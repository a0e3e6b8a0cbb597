package build

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
)

// TagRef is what a tag names: a build, since when.
type TagRef struct {
	BuildID   string    `json:"buildID"`
	CreatedAt time.Time `json:"createdAt"`
}

// Tag is one tag of a template (GET /templates/{id}/tags).
type Tag struct {
	Tag       string    `json:"tag"`
	BuildID   string    `json:"buildID"`
	CreatedAt time.Time `json:"createdAt"`
}

// checkTags refuses tags that could not be part of a name:tag reference.
func checkTags(tags []string) error {
	for _, t := range tags {
		if t == "" || len(t) > MaxNameLength || strings.ContainsAny(t, ":/ \t\n") {
			return fmt.Errorf("tag %q: want 1..%d characters without ':', '/' or spaces: %w", t, MaxNameLength, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

// migrateTags gives records written before tags named builds a TagBuilds
// map: every tag names the latest ready build.
func migrateTags(r *Record) {
	if r.TagBuilds != nil || len(r.Tags) == 0 {
		return
	}
	ready := latestReady(r)
	if ready == nil {
		r.Tags = nil
		return
	}
	r.TagBuilds = map[string]TagRef{}
	for _, t := range r.Tags {
		r.TagBuilds[t] = TagRef{BuildID: ready.ID, CreatedAt: r.UpdatedAt}
	}
}

// latestReady is the template's most recent ready build (nil when none).
func latestReady(r *Record) *Build {
	for i := len(r.Builds) - 1; i >= 0; i-- {
		if r.Builds[i].Status == StatusReady {
			return r.Builds[i]
		}
	}
	return nil
}

// Tags lists a template's tags with the builds they name, in the order
// they were first given.
func (s *Service) Tags(ctx context.Context, ref string) ([]Tag, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.byNameLocked(ref)
	if r == nil {
		return nil, fmt.Errorf("template %q: %w", ref, errdefs.ErrNotFound)
	}
	out := []Tag{}
	for _, t := range r.Tags {
		tr := r.TagBuilds[t]
		out = append(out, Tag{Tag: t, BuildID: tr.BuildID, CreatedAt: tr.CreatedAt})
	}
	return out, nil
}

// AssignTags makes tags name the build that target ("name:tag", or a
// bare name for its latest ready build) names, and returns that build.
func (s *Service) AssignTags(ctx context.Context, target string, tags []string) (string, error) {
	if len(tags) == 0 {
		return "", fmt.Errorf("no tags to assign: %w", errdefs.ErrInvalidArgument)
	}
	if err := checkTags(tags); err != nil {
		return "", err
	}
	name, tag, err := splitName(target)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.byNameLocked(name)
	if r == nil {
		return "", fmt.Errorf("template %q: %w", name, errdefs.ErrNotFound)
	}
	var b *Build
	if tag == "" {
		b = latestReady(r)
	} else if tr, ok := r.TagBuilds[tag]; ok {
		b = findBuild(r, tr.BuildID)
	}
	if b == nil || b.Status != StatusReady {
		return "", fmt.Errorf("template %q has no ready build: %w", target, errdefs.ErrNotFound)
	}
	now := time.Now().UTC()
	for _, t := range tags {
		setTag(r, t, TagRef{BuildID: b.ID, CreatedAt: now})
	}
	if err := s.syncLocked(ctx, r, nil); err != nil {
		return "", err
	}
	return b.ID, s.saveLocked(r)
}

// RemoveTags deletes tags of template name; a tag it does not have is
// ErrNotFound (and nothing is removed).
func (s *Service) RemoveTags(ctx context.Context, name string, tags []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.byNameLocked(name)
	if r == nil {
		return fmt.Errorf("template %q: %w", name, errdefs.ErrNotFound)
	}
	for _, t := range tags {
		if _, ok := r.TagBuilds[t]; !ok {
			return fmt.Errorf("template %q has no tag %q: %w", name, t, errdefs.ErrNotFound)
		}
	}
	for _, t := range tags {
		delete(r.TagBuilds, t)
		r.Tags = slices.DeleteFunc(r.Tags, func(x string) bool { return x == t })
	}
	if err := s.syncLocked(ctx, r, nil); err != nil {
		return err
	}
	return s.saveLocked(r)
}

func setTag(r *Record, tag string, ref TagRef) {
	if r.TagBuilds == nil {
		r.TagBuilds = map[string]TagRef{}
	}
	if _, ok := r.TagBuilds[tag]; !ok {
		r.Tags = append(r.Tags, tag)
	}
	r.TagBuilds[tag] = ref
}

// syncLocked makes the store's templates match the record: the template's
// own id starts its latest ready build (by name and by the tags naming
// it); every older build a tag still names has a store template of its
// own carrying those name:tag aliases; older builds no tag names have
// none. publishing, when not nil, is a build being published: the latest
// ready one from now on. s.mu held.
func (s *Service) syncLocked(ctx context.Context, r *Record, publishing *Build) error {
	latest := latestReady(r)
	if publishing != nil {
		latest = publishing
	}
	if latest == nil {
		return nil
	}
	byBuild := map[string][]string{}
	for _, t := range r.Tags {
		id := r.TagBuilds[t].BuildID
		byBuild[id] = append(byBuild[id], r.Names[0]+":"+t)
	}
	// Aliases move between store templates: drop the old holders first.
	for _, b := range r.Builds {
		if b != latest && b.Published != nil && b.Published.ID != r.ID {
			if err := s.cfg.Store.DeleteTemplate(ctx, b.Published.ID); err != nil && !errdefs.IsNotFound(err) {
				return err
			}
		}
	}
	if err := s.putLocked(ctx, latest, r.ID, append([]string{r.Names[0]}, byBuild[latest.ID]...)); err != nil {
		return err
	}
	for _, b := range r.Builds {
		if b == latest || b.Published == nil {
			continue
		}
		if len(byBuild[b.ID]) == 0 {
			b.Published.ID = ""
			continue
		}
		if b.Published.ID == "" || b.Published.ID == r.ID {
			b.Published.ID = runtime.NewID()
		}
		if err := s.putLocked(ctx, b, b.Published.ID, byBuild[b.ID]); err != nil {
			return err
		}
	}
	// The builds kept may have changed (a tag moved off an older build):
	// the template holds their content and lets go of the rest.
	return s.holdLocked(ctx, r)
}

func (s *Service) putLocked(ctx context.Context, b *Build, id string, aliases []string) error {
	t := *b.Published
	t.ID, t.Aliases, t.Kind = id, aliases, store.KindTemplate
	b.Published.ID = id
	return s.cfg.Store.PutTemplate(ctx, &t)
}

// storeIDsLocked are the ids of the store templates a record owns.
func storeIDsLocked(r *Record) []string {
	ids := []string{r.ID}
	for _, b := range r.Builds {
		if b.Published != nil && b.Published.ID != "" && b.Published.ID != r.ID {
			ids = append(ids, b.Published.ID)
		}
	}
	return ids
}
