package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/forkbox/forkbox/bench/benchd"
	"github.com/forkbox/forkbox/client"
)

// creates measures, alternating so both sides see the same machine:
// create → first command from the small template and from base, then
// create → first HTTP 200 from the web template and from base with the
// server started after create. Each sandbox is killed before the next.
func (b *bench) creates(ctx context.Context, r *results) error {
	for _, name := range []string{"small", "web"} {
		if err := b.waitPool(ctx, name); err != nil {
			return err
		}
	}
	for i := 0; i < b.c.n; i++ {
		for _, m := range []struct {
			tpl, cmd, want string
			out            *[]float64
		}{
			{"small", "cat built.txt", "built\n", &r.cmdBuilt},
			{"base", "echo built", "built\n", &r.cmdBase},
		} {
			d, err := b.firstCommand(ctx, m.tpl, m.cmd, m.want)
			if err != nil {
				return err
			}
			*m.out = append(*m.out, benchd.MS(d))
		}
		d, err := b.firstHTTP(ctx, "web", "")
		if err != nil {
			return err
		}
		r.httpReady = append(r.httpReady, benchd.MS(d))
		if d, err = b.firstHTTP(ctx, "base", serveCmd); err != nil {
			return err
		}
		r.httpStartOnCreate = append(r.httpStartOnCreate, benchd.MS(d))
	}
	return nil
}

// firstCommand creates a sandbox of tpl and runs cmd as the SDKs do
// (bash -l -c); the time is from the create call to the output.
func (b *bench) firstCommand(ctx context.Context, tpl, cmd, want string) (time.Duration, error) {
	t0 := time.Now()
	sb, err := b.cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: tpl, Timeout: time.Minute})
	if err != nil {
		return 0, err
	}
	defer b.cl.KillSandbox(context.WithoutCancel(ctx), sb.SandboxID)
	var out strings.Builder
	code, err := b.cl.Conn(sb.SandboxID, sb.EnvdAccessToken).Exec(ctx, client.ExecOptions{Shell: cmd, Stdout: &out})
	d := time.Since(t0)
	if err != nil || code != 0 || out.String() != want {
		return 0, fmt.Errorf("%s in a sandbox of %s: exit %d %v: %q", cmd, tpl, code, err, out.String())
	}
	return d, nil
}

// firstHTTP creates a sandbox of tpl, starts start in it when given (in
// the background, as a user would), and polls port 8080 through the data
// plane until it answers 200; the time is from the create call.
func (b *bench) firstHTTP(ctx context.Context, tpl, start string) (time.Duration, error) {
	t0 := time.Now()
	sb, err := b.cl.CreateSandbox(ctx, client.CreateOptions{TemplateID: tpl, Timeout: time.Minute})
	if err != nil {
		return 0, err
	}
	defer b.cl.KillSandbox(context.WithoutCancel(ctx), sb.SandboxID)
	if start != "" {
		bg := "nohup sh -c '" + start + "' >/dev/null 2>&1 &"
		if code, err := b.cl.Conn(sb.SandboxID, sb.EnvdAccessToken).Exec(ctx, client.ExecOptions{Shell: bg}); err != nil || code != 0 {
			return 0, fmt.Errorf("start the server in a sandbox of %s: exit %d %v", tpl, code, err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.d.URL+"/", nil)
		req.Header.Set("E2b-Sandbox-Id", sb.SandboxID)
		req.Header.Set("E2b-Sandbox-Port", "8080")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return time.Since(t0), nil
		}
	}
	return 0, fmt.Errorf("port 8080 of a sandbox of %s never answered 200", tpl)
}

// waitPool waits until the daemon holds a pooled sandbox of template name
// (forkbox_pool_sandboxes on /metrics): the creates measured are the
// pooled case, as base's are.
func (b *bench) waitPool(ctx context.Context, name string) error {
	tpl, err := b.templateID(ctx, name)
	if err != nil {
		return err
	}
	series := `forkbox_pool_sandboxes{template="` + tpl + `"} `
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.d.URL+"/metrics", nil)
		req.Header.Set("X-API-Key", b.d.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(resp.Body)
		full := false
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), series); ok && v != "0" {
				full = true
			}
		}
		resp.Body.Close()
		if full {
			return nil
		}
	}
	slog.Warn("no pooled sandbox of the template within a minute", "template", name)
	return nil
}

// templateID is the id of the template called name.
func (b *bench) templateID(ctx context.Context, name string) (string, error) {
	list, err := b.cl.ListTemplates(ctx)
	if err != nil {
		return "", err
	}
	for _, t := range list {
		if len(t.Names) > 0 && t.Names[0] == name {
			return t.TemplateID, nil
		}
	}
	return "", fmt.Errorf("no template %s", name)
}
