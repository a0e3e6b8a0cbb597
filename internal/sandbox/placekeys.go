package sandbox

import (
	"context"

	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/store"
)

// This file names what a sandbox starts from for placement: the images a
// restore on the node picked reads (images.CacheKey, images.
// ContentCacheKey), so placement can prefer a node whose image cache
// holds them over one that would download them.

// PickNode chooses the node a sandbox goes to (the cluster's placement),
// preferring one whose image cache holds the images named by want.
type PickNode func(ctx context.Context, want []string) (node string, err error)

// restoreKeys are the cache keys of a restore from image ref of a sandbox
// running on content: the image and the sandbox's root filesystem layer.
func restoreKeys(ref images.Ref, content []images.ContentRef) []string {
	keys := []string{images.CacheKey(ref)}
	if layer, ok := images.Find(content, images.KindLayer); ok {
		keys = append(keys, images.ContentCacheKey(layer))
	}
	return keys
}

// TemplateKeys returns the cache keys of what a create from templateID
// (an id or alias) reads: a snapshot's image and layer, or a template's
// layer and template image. An unknown template, or one on no content
// (a built-in's directory), wants nothing.
func (m *Manager) TemplateKeys(ctx context.Context, templateID string) []string {
	tpl, err := m.st.GetTemplate(ctx, templateID)
	if err != nil {
		return nil
	}
	if tpl.Kind == store.KindSnapshot {
		return restoreKeys(images.Snapshot(tpl.ID), tpl.Content)
	}
	var keys []string
	for _, kind := range []images.ContentKind{images.KindLayer, images.KindTemplateImage} {
		if ref, ok := images.Find(tpl.Content, kind); ok {
			keys = append(keys, images.ContentCacheKey(ref))
		}
	}
	return keys
}
