package build

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
)

// DefaultReadyTimeout bounds how long a template's ready command may take
// to succeed when Config.ReadyTimeout is zero.
const DefaultReadyTimeout = 120 * time.Second

// startLog is where the start command's output goes inside the sandbox.
const startLog = "/tmp/.forkbox-start.log"

// finalize gives the template its settings, starts the start command,
// waits for the ready command, captures the sandbox (memory and files) as
// the template's image and records the template as ready.
func (j *job) finalize(ctx context.Context) error {
	meta, err := j.meta()
	if err != nil {
		return err
	}
	cpu, mem := j.limits()
	key := j.hashKey("image", j.key, j.spec.StartCmd, j.spec.ReadyCmd, meta.User, meta.Workdir, j.envKey(),
		strings.Join(j.s.cfg.AgentArgs, " "), fmt.Sprint(cpu, mem), j.s.cfg.ImageSalt)
	if j.useImage(ctx, key) {
		j.logf("info", "CACHED start-ready image")
	} else if err := j.capture(ctx, meta, cpu, mem, key); err != nil {
		return err
	}
	return j.s.publish(ctx, j, meta, &store.Template{
		ID: j.tplID, Kind: store.KindTemplate, CPUCount: cpu, MemoryMB: mem,
		Content:    []images.ContentRef{layerRef(meta.Layer), imageRef(key)},
		DiskSizeMB: builtDiskMB, CreatedAt: time.Now().UTC(), AgentArgs: j.s.cfg.AgentArgs,
		Version: key[:16],
	})
}

// builtDiskMB is the writable filesystem of a built template's sandboxes:
// its image is checkpointed with that size, which restores keep.
const builtDiskMB = 1024

// meta is what sandboxes of the template inherit: the last USER (`user`
// when none), the last WORKDIR (that user's home when none), the env.
func (j *job) meta() (*Meta, error) {
	user := UserName
	if j.userSet {
		user = j.user
	}
	acct, ok := lookupUser(j.rootfs, user)
	if !ok {
		return nil, fmt.Errorf("the template's user %q does not exist in its rootfs: %w", user, errdefs.ErrInvalidArgument)
	}
	wd := acct.home
	if j.wdSet || (j.workdir != "" && j.workdir != "/") {
		wd = j.workdir
	}
	env := make(map[string]string, len(j.env))
	for k, v := range j.env {
		env[k] = v
	}
	return &Meta{Env: env, User: user, Workdir: wd, Layer: j.layer}, nil
}

func (j *job) capture(ctx context.Context, meta *Meta, cpu, mem int, key string) error {
	cp, ok := j.s.cfg.Runtime.(runtime.Checkpointer)
	if !ok {
		return fmt.Errorf("runtime %s cannot checkpoint: %w", j.s.cfg.Runtime.Name(), errdefs.ErrUnavailable)
	}
	j.logf("info", "Starting the template's sandbox")
	b, err := startBox(ctx, j.s.cfg.Runtime, runtime.Spec{
		RootFS: j.rootfs, Args: j.s.cfg.AgentArgs,
		Resources: runtime.Resources{CPUCount: cpu, MemoryMB: mem, DiskMB: builtDiskMB},
	}, map[string]any{"envVars": meta.Env, "defaultUser": meta.User, "defaultWorkdir": meta.Workdir})
	if err != nil {
		return err
	}
	defer b.close(ctx)
	mk := `mkdir -p "$1" && chown "$2" "$1"`
	if code, err := b.exec(ctx, client.ExecOptions{Cmd: []string{"/bin/sh", "-c", mk, "sh", meta.Workdir, meta.User}, User: "root"}, nil); err != nil || code != 0 {
		return fmt.Errorf("create workdir %s: exit %d: %v", meta.Workdir, code, err)
	}
	if err := j.startAndWait(ctx, b, meta); err != nil {
		return err
	}
	tmp, err := j.s.content.Create(ctx, imageRef(key))
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := cp.Checkpoint(ctx, b.id, tmp, runtime.CheckpointOptions{}); err != nil {
		j.s.content.Abort(context.WithoutCancel(ctx), tmp)
		return fmt.Errorf("capture the template's sandbox: %w", err)
	}
	if err := j.s.content.Commit(ctx, imageRef(key), tmp, j.holder()); err != nil {
		j.s.content.Abort(context.WithoutCancel(ctx), tmp)
		return err
	}
	if !j.useImage(ctx, key) {
		return fmt.Errorf("image %s vanished after its commit", short(key))
	}
	j.logf("info", "Captured memory and files in %s", time.Since(t0).Round(time.Millisecond))
	return nil
}

// startAndWait starts the start command detached and polls the ready
// command until it exits 0.
func (j *job) startAndWait(ctx context.Context, b *box, meta *Meta) error {
	if j.spec.StartCmd == "" {
		return nil
	}
	j.logf("info", "Start command: %s", j.spec.StartCmd)
	// nohup without nohup(1), which many images (busybox builds among
	// them) lack: an ignored SIGHUP stays ignored across exec.
	start := `( trap '' HUP; exec /bin/bash -l -c "$1" ) >` + startLog + ` 2>&1 </dev/null &`
	if code, err := b.exec(ctx, client.ExecOptions{Cmd: []string{"/bin/sh", "-c", start, "sh", j.spec.StartCmd}, User: meta.User, Cwd: meta.Workdir}, nil); err != nil || code != 0 {
		return fmt.Errorf("start command '%s': exit %d: %v", j.spec.StartCmd, code, err)
	}
	if j.spec.ReadyCmd == "" {
		return nil
	}
	j.logf("info", "Waiting for ready command: %s", j.spec.ReadyCmd)
	timeout := j.s.cfg.ReadyTimeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	deadline := time.Now().Add(timeout)
	for {
		var out bytes.Buffer
		code, err := b.exec(ctx, client.ExecOptions{Shell: j.spec.ReadyCmd, User: meta.User, Cwd: meta.Workdir},
			func(l string) { out.WriteString(l + "\n") })
		if err == nil && code == 0 {
			j.logf("info", "Template is ready")
			return nil
		}
		if time.Now().After(deadline) {
			var slog bytes.Buffer
			b.exec(ctx, client.ExecOptions{Cmd: []string{"tail", "-n", "20", startLog}, User: "root"}, func(l string) { slog.WriteString(l + "\n") })
			return fmt.Errorf("ready command '%s' did not succeed within %s (last exit %d %v): %s; start command output: %s",
				j.spec.ReadyCmd, timeout, code, err, strings.TrimSpace(out.String()), strings.TrimSpace(slog.String()))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// publish records the built template: the build's store template, the
// tags it was requested with (they now name it), the record's settings.
func (s *Service) publish(ctx context.Context, j *job, meta *Meta, tpl *store.Template) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.records[j.tplID]
	if r == nil {
		return fmt.Errorf("template %s was deleted during its build: %w", j.tplID, errdefs.ErrNotFound)
	}
	b := findBuild(r, j.buildID)
	if b == nil {
		return fmt.Errorf("build %s of template %s: %w", j.buildID, j.tplID, errdefs.ErrNotFound)
	}
	if r.CPUCount > 0 {
		tpl.CPUCount = r.CPUCount
	}
	// Sandboxes start from the build from here on; its status turns ready
	// in finish, once its build sandbox and scratch are gone (a client
	// that sees ready may start the next build at once).
	b.Published = tpl
	now := time.Now().UTC()
	for _, t := range b.Tags {
		setTag(r, t, TagRef{BuildID: b.ID, CreatedAt: now})
	}
	if err := s.syncLocked(ctx, r, b); err != nil {
		b.Published = nil
		return err
	}
	r.Meta = meta
	return s.saveLocked(r)
}
