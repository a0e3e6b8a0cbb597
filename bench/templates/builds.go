package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/forkbox/forkbox/bench/benchd"
	"github.com/forkbox/forkbox/client"
)

// ocitestConfig is the busybox image's config: its PATH, and a Cmd that is
// only a shell (so it names no start command).
func ocitestConfig() v1.Config {
	return v1.Config{Env: []string{"PATH=/bin"}, Cmd: []string{"sh"}}
}

// upload is a COPY step's files: one file, tarred.
type upload struct {
	name string
	body []byte
}

// copyStep uploads u for template tplID and returns the COPY step.
func (b *bench) copyStep(ctx context.Context, tplID, dest string, u upload) (client.TemplateStep, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: u.name, Mode: 0o644, Size: int64(len(u.body)), Typeflag: tar.TypeReg})
	tw.Write(u.body)
	tw.Close()
	args := []string{u.name, dest, "root", ""}
	h := sha256.Sum256(append([]byte(fmt.Sprint(args)), buf.Bytes()...))
	st := client.TemplateStep{Type: "COPY", Args: args, FilesHash: hex.EncodeToString(h[:])}
	_, err := b.cl.UploadTemplateFiles(ctx, tplID, st.FilesHash, bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	return st, err
}

// build runs one build of name (steps made by mk once the template id is
// known) and returns its wall time, request to ready, and its id.
func (b *bench) build(ctx context.Context, name string, mk func(tplID string) (client.TemplateBuildSpec, error)) (time.Duration, string, error) {
	t0 := time.Now()
	tk, err := b.cl.RequestTemplateBuild(ctx, name, nil, 0, 0)
	if err != nil {
		return 0, "", err
	}
	spec, err := mk(tk.TemplateID)
	if err != nil {
		return 0, "", err
	}
	if err := b.cl.StartTemplateBuild(ctx, tk.TemplateID, tk.BuildID, spec); err != nil {
		return 0, "", err
	}
	for {
		st, err := b.cl.GetTemplateBuildStatus(ctx, tk.TemplateID, tk.BuildID, 1<<20)
		if err != nil {
			return 0, "", err
		}
		switch st.Status {
		case "ready":
			return time.Since(t0), tk.TemplateID, nil
		case "error":
			return 0, "", fmt.Errorf("build of %s failed: %+v", name, st.Reason)
		}
		select {
		case <-ctx.Done():
			return 0, "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// small is the small template: the busybox image, ENV, COPY, WORKDIR, RUN.
func (b *bench) small(ctx context.Context, force bool) func(string) (client.TemplateBuildSpec, error) {
	return func(tplID string) (client.TemplateBuildSpec, error) {
		cp, err := b.copyStep(ctx, tplID, "/opt/app/", upload{"app.txt", []byte("copied\n")})
		if err != nil {
			return client.TemplateBuildSpec{}, err
		}
		return client.TemplateBuildSpec{FromImage: b.image, Force: force, Steps: []client.TemplateStep{
			{Type: "ENV", Args: []string{"GREETING", "hi"}}, cp,
			{Type: "WORKDIR", Args: []string{"/opt/app"}},
			{Type: "RUN", Args: []string{"echo built > built.txt", "root"}},
		}}, nil
	}
}

// web is the start-ready template on base: a page served by python3's
// http.server, captured once port 8080 listens (the SDK's waitForPort).
func (b *bench) web(ctx context.Context) func(string) (client.TemplateBuildSpec, error) {
	return func(tplID string) (client.TemplateBuildSpec, error) {
		cp, err := b.copyStep(ctx, tplID, "/srv/site/", upload{"index.html", []byte("<h1>forkbox</h1>\n")})
		if err != nil {
			return client.TemplateBuildSpec{}, err
		}
		return client.TemplateBuildSpec{Steps: []client.TemplateStep{cp},
			StartCmd: serveCmd, ReadyCmd: `[ -n "$(ss -Htuln sport = :8080)" ]`}, nil
	}
}

// serveCmd serves /srv/site (the web template's COPY) or /tmp on 8080.
const serveCmd = "cd /srv/site 2>/dev/null || cd /tmp; exec python3 -m http.server 8080"

// builds measures the cold build, forced and cached rebuilds of the small
// template, and the first build on base (the web template).
func (b *bench) builds(ctx context.Context, r *results) error {
	d, _, err := b.build(ctx, "small", b.small(ctx, false))
	if err != nil {
		return err
	}
	r.cold = benchd.MS(d)
	slog.Info("cold build", "took", d)
	for i := 0; i < b.c.n; i++ {
		if d, _, err = b.build(ctx, "small", b.small(ctx, true)); err != nil {
			return err
		}
		r.forced = append(r.forced, benchd.MS(d))
	}
	for i := 0; i < b.c.n; i++ {
		if d, _, err = b.build(ctx, "small", b.small(ctx, false)); err != nil {
			return err
		}
		r.cached = append(r.cached, benchd.MS(d))
	}
	slog.Info("first build on base (imports base as a layer): a few minutes")
	if d, _, err = b.build(ctx, "web", b.web(ctx)); err != nil {
		return err
	}
	r.onBase = benchd.MS(d)
	return nil
}
