package sandbox

import (
	"context"
	"slices"
	"testing"

	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/store"
)

// TestTemplateKeys: a create from a template wants its layer and
// template image, one from a snapshot the snapshot's image and layer; a
// template on a plain directory, or an unknown one, wants nothing.
func TestTemplateKeys(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	layer, img := images.Layer("aa"), images.TemplateImage("bb")
	for _, tpl := range []*store.Template{
		{ID: "built", Kind: store.KindTemplate, Content: []images.ContentRef{img, layer}, CPUCount: 1, MemoryMB: 256},
		{ID: "snap", Kind: store.KindSnapshot, Content: []images.ContentRef{layer}, CPUCount: 1, MemoryMB: 256},
	} {
		if err := e.st.PutTemplate(ctx, tpl); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		id   string
		want []string
	}{
		{"built", []string{images.ContentCacheKey(layer), images.ContentCacheKey(img)}},
		{"snap", []string{images.CacheKey(images.Snapshot("snap")), images.ContentCacheKey(layer)}},
		{"base", nil},
		{"nope", nil},
	} {
		if got := e.m.TemplateKeys(ctx, c.id); !slices.Equal(got, c.want) {
			t.Errorf("keys of template %s: %q, want %q", c.id, got, c.want)
		}
	}
}
