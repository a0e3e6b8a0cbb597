package sandbox

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/cleanup"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
)

// WarmTemplate makes creating from tpl a restore instead of a cold boot:
// it boots one sandbox of the template, waits for its agent, checkpoints it
// into imageDir and removes it. A sandbox created afterwards starts from that
// image with its agent already listening — the cold boot is paid once. An
// image already in imageDir is reused (the caller keys imageDir by what the
// image depends on: rootfs, agent and runsc versions).
func (m *Manager) WarmTemplate(ctx context.Context, tpl *store.Template, imageDir string) error {
	if imageExists(imageDir) {
		tpl.ImageDir, tpl.Warmed = imageDir, true
		return nil
	}
	if _, err := m.checkpointer(); err != nil {
		return err
	}
	id := newID()
	// A private scratch name: two daemons sharing the template directory may
	// warm the same template at once; the first rename wins. The pid in it
	// lets a daemon remove the scratch of one killed mid-warm (ScratchOf).
	tmp := fmt.Sprintf("%s%s%d-%s", imageDir, scratchInfix, os.Getpid(), id)
	rec := store.Sandbox{ID: id, RootFS: tpl.RootFS, AgentArgs: tpl.AgentArgs, CPUCount: tpl.CPUCount, MemoryMB: tpl.MemoryMB, DiskSizeMB: tpl.DiskSizeMB, AllowInternet: true}
	start := m.now()
	if _, err := m.rt.Create(ctx, m.spec(&rec)); err != nil {
		return fmt.Errorf("boot template %s: %w", tpl.ID, err)
	}
	// The booted sandbox and the scratch image go whatever happens: the
	// image that stays is the one renamed into imageDir.
	undo := cleanup.New(m.log)
	defer undo.Run(ctx)
	undo.Add("delete template sandbox", func(ctx context.Context) error { return m.rt.Delete(ctx, rec.ID) })
	undo.Add("remove scratch image", func(context.Context) error { return os.RemoveAll(tmp) })
	for _, port := range append([]int{m.cfg.AgentPort}, tpl.ReadyPorts...) {
		if err := m.waitHealthy(ctx, rec.ID, port); err != nil {
			return err
		}
	}
	booted := m.now()
	if err := m.checkpointTemplate(ctx, rec.ID, tmp); err != nil {
		return fmt.Errorf("checkpoint template %s: %w", tpl.ID, err)
	}
	if err := os.Rename(tmp, imageDir); err != nil && !imageExists(imageDir) {
		return err
	}
	tpl.ImageDir, tpl.Warmed = imageDir, true
	m.log.Info("template image ready", "template", tpl.ID, "image", imageDir,
		"boot", booted.Sub(start), "checkpoint", m.now().Sub(booted))
	return nil
}

// scratchInfix separates a template image's directory name from its
// scratch suffix, "<pid>-<sandbox id>".
const scratchInfix = ".tmp-"

// ScratchOf returns the pid of the process warming into scratch directory
// name (a template image's, with WarmTemplate's suffix).
func ScratchOf(name string) (pid int, ok bool) {
	_, rest, ok := strings.Cut(name, scratchInfix)
	if !ok {
		return 0, false
	}
	p, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(p)
	return pid, err == nil && pid > 0
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

// checkpointTemplate writes a template sandbox's state into dir, which it
// creates. Template images live in the template cache, not the image
// store (they are keyed by what they are built from; see WarmTemplate).
func (m *Manager) checkpointTemplate(ctx context.Context, id, dir string) error {
	cp, err := m.checkpointer()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("image dir: %w", err)
	}
	return cp.Checkpoint(ctx, id, dir, runtime.CheckpointOptions{})
}

// imageExists reports whether dir holds a written template image.
func imageExists(dir string) bool {
	if dir == "" {
		return false
	}
	ents, err := os.ReadDir(dir)
	return err == nil && len(ents) > 0
}
