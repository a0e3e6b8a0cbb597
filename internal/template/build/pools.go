package build

import "context"

// Pools is what keeps sandboxes of templates restored ahead of time (the
// sandbox Manager's pools): a pooled sandbox runs on a template's root
// filesystem and was restored from its image, files this service may
// collect once a template is deleted or rebuilt.
type Pools interface {
	// WarmPool hears that templateID was just built: its pooled
	// sandboxes of an older image go, new ones are restored.
	WarmPool(ctx context.Context, templateID string)
	// ReconcilePools removes, before it returns, the pooled sandboxes of
	// templates deleted or given another image since.
	ReconcilePools(ctx context.Context)
}

// reconcilePools runs before every Collect that may remove a template's
// files: no pooled sandbox may be left running on them.
func (s *Service) reconcilePools(ctx context.Context) {
	if s.cfg.Pools != nil {
		s.cfg.Pools.ReconcilePools(ctx)
	}
}
