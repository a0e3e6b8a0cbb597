package sandbox

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/forkbox/forkbox/internal/cleanup"
	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
)

// WarmTemplate makes creating from built-in template tpl a restore instead
// of a cold boot: unless the content store has image ref already, it boots
// one sandbox of the template, waits for its agent, checkpoints it as ref
// and removes it. A sandbox created afterwards starts from that image with
// its agent already listening — the cold boot is paid once. The caller
// keys ref by what the image depends on (rootfs, agent and runsc
// versions). The template holds ref from now on, and its images of other
// shapes made from ref (shape.go), nothing else: an image of an older key
// goes, unless a sandbox still holds it. tpl's Content names ref, and tpl
// is Warmed.
func (m *Manager) WarmTemplate(ctx context.Context, tpl *store.Template, ref images.ContentRef) error {
	h := builtinHolder(tpl.ID)
	err := m.content.Hold(ctx, h, ref)
	if errdefs.IsNotFound(err) {
		err = m.warmImage(ctx, tpl, ref, h)
	}
	if err == nil {
		err = m.holdShapes(ctx, tpl.ID, ref)
	}
	if err != nil {
		return fmt.Errorf("template %s image: %w", tpl.ID, err)
	}
	tpl.Content, tpl.Warmed = []images.ContentRef{ref}, true
	return nil
}

func builtinHolder(id string) images.Holder { return images.Holder{Kind: images.HolderBuiltin, ID: id} }

// warmImage boots a sandbox of tpl and commits its checkpoint as ref,
// held by h.
func (m *Manager) warmImage(ctx context.Context, tpl *store.Template, ref images.ContentRef, h images.Holder) error {
	cp, err := m.checkpointer()
	if err != nil {
		return err
	}
	rec := store.Sandbox{ID: newID(), RootFS: tpl.RootFS, AgentArgs: tpl.AgentArgs, CPUCount: tpl.CPUCount, MemoryMB: tpl.MemoryMB, DiskSizeMB: tpl.DiskSizeMB, AllowInternet: true}
	spec, err := m.spec(ctx, &rec)
	if err != nil {
		return err
	}
	start := m.now()
	if _, err := m.rt.Create(ctx, spec); err != nil {
		return fmt.Errorf("boot template %s: %w", tpl.ID, err)
	}
	// The booted sandbox and the scratch image go whatever happens: the
	// image that stays is the one committed.
	undo := cleanup.New(m.log)
	defer undo.Run(ctx)
	undo.Add("delete template sandbox", func(ctx context.Context) error { return m.rt.Delete(ctx, rec.ID) })
	for _, port := range append([]int{m.cfg.AgentPort}, tpl.ReadyPorts...) {
		if err := m.waitHealthy(ctx, rec.ID, port); err != nil {
			return err
		}
	}
	booted := m.now()
	dir, err := m.content.Create(ctx, ref)
	if err != nil {
		return err
	}
	undo.Add("remove scratch image", func(ctx context.Context) error { return m.content.Abort(ctx, dir) })
	if err := cp.Checkpoint(ctx, rec.ID, dir, runtime.CheckpointOptions{}); err != nil {
		return fmt.Errorf("checkpoint template %s: %w", tpl.ID, err)
	}
	if err := m.content.Commit(ctx, ref, dir, h); err != nil {
		return err
	}
	m.log.Info("template image ready", "template", tpl.ID, "image", ref.String(),
		"boot", booted.Sub(start), "checkpoint", m.now().Sub(booted))
	return nil
}

// waitHealthy polls GET /health on port until it answers.
func (m *Manager) waitHealthy(ctx context.Context, id string, port int) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.AgentWait)
	defer cancel()
	for {
		url := fmt.Sprintf("http://%s:%d/health", id, port)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := m.agentHTTP.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("port %d of template sandbox %s did not answer: %w", port, id, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
