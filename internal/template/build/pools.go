package build

import "context"

// Pools is what keeps sandboxes of templates restored ahead of time (the
// sandbox Manager's pools): a pooled sandbox runs on a template's root
// filesystem and was restored from its image, and holds them in the
// content store until it goes — so the pools of a template deleted or
// rebuilt must go for its content to.
type Pools interface {
	// WarmPool hears that templateID was just built: its pooled
	// sandboxes of an older image go, new ones are restored.
	WarmPool(ctx context.Context, templateID string)
	// ReconcilePools removes, before it returns, the pooled sandboxes of
	// templates deleted or given another image since.
	ReconcilePools(ctx context.Context)
}

// reconcilePools runs before a template lets go of content (deleted, or
// rebuilt): its pooled sandboxes would hold it on.
func (s *Service) reconcilePools(ctx context.Context) {
	if s.cfg.Pools != nil {
		s.cfg.Pools.ReconcilePools(ctx)
	}
}
