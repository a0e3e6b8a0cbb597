package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// cliResult is one run of bin/forkbox.
type cliResult struct {
	code           int
	stdout, stderr string
}

// forkboxCLI runs bin/forkbox args against d (FORKBOX_API_URL/KEY) in dir.
func forkboxCLI(t *testing.T, d *daemontest.Daemon, dir string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(daemontest.BinDir(t), "forkbox"), args...)
	cmd.Dir, cmd.Env = dir, d.Env()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("forkbox %v: %v", args, err)
	}
	return r
}

// mustCLI runs a command that must succeed.
func mustCLI(t *testing.T, d *daemontest.Daemon, dir string, args ...string) cliResult {
	t.Helper()
	r := forkboxCLI(t, d, dir, args...)
	if r.code != 0 {
		t.Fatalf("forkbox %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// cliDockerfile builds on the busybox image: ARG, ENV, COPY of a context
// directory, WORKDIR, RUN, and a CMD that serves the copied site.
const cliDockerfile = `FROM docker.io/fbx/busybox:1
ARG GREETING=hello
ENV GREETING=$GREETING
COPY site/ /www/
WORKDIR /www
RUN echo "$GREETING from RUN" > /www/run.txt
CMD ["httpd", "-f", "-p", "8081", "-h", "/www"]
`

// checkTemplateCLI: `forkbox template build NAME -f Dockerfile` shows its
// progress (steps n/m, the pull, the upload) and with --json prints the
// build as one JSON document; its CMD serves in the template's
// sandboxes; `template logs` pages the log; `sandbox create --image`
// cold-starts an image.
func checkTemplateCLI(t *testing.T, d *daemontest.Daemon) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(cliDockerfile), 0o644)
	os.MkdirAll(filepath.Join(dir, "site"), 0o755)
	os.WriteFile(filepath.Join(dir, "site", "index.html"), []byte("from the CLI's context\n"), 0o644)
	first := mustCLI(t, d, dir, "template", "build", "fbx-cli", "-f", "Dockerfile")
	t.Logf("template build progress:\n%s", first.stderr)
	for _, want := range []string{"COPY site/: uploaded", "FROM docker.io/fbx/busybox:1: pulling", "pulled ", "[5/8] COPY site/ /www/", "[7/8] RUN", "done in", "Start command: ", "Build finished"} {
		if !strings.Contains(first.stderr, want) {
			t.Errorf("template build's progress lacks %q", want)
		}
	}
	if !strings.Contains(first.stdout, "template fbx-cli ready") {
		t.Errorf("template build's output: %q", first.stdout)
	}
	again := mustCLI(t, d, dir, "template", "build", "fbx-cli", "-f", "Dockerfile", "--json")
	var built struct {
		TemplateID, BuildID, Status string
		Names                       []string
	}
	if err := json.Unmarshal([]byte(again.stdout), &built); err != nil || built.Status != "ready" || built.TemplateID == "" || built.Names[0] != "fbx-cli" {
		t.Fatalf("template build --json: %v: %q", err, again.stdout)
	}
	if strings.Contains(again.stderr, "CACHED") {
		t.Errorf("--json printed the build's log on stderr: %q", again.stderr)
	}
	logs := mustCLI(t, d, dir, "template", "logs", "fbx-cli", built.BuildID, "--json")
	var entries []client.TemplateLogEntry
	json.Unmarshal([]byte(logs.stdout), &entries)
	if cached := countPrefix(entries, "CACHED ["); cached != 2 {
		t.Errorf("the rebuild's log has %d cached RUN/COPY layers, want 2: %+v", cached, entries)
	}
	checkCLISandbox(t, d, dir, "fbx-cli", "/www/run.txt", "hello from RUN\n")
	checkHTTP(t, d, "fbx-cli", 8081, "from the CLI's context")
	checkCreateImage(t, d, dir)
	mustCLI(t, d, dir, "template", "delete", "fbx-cli")
}

func countPrefix(entries []client.TemplateLogEntry, prefix string) int {
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Message, prefix) {
			n++
		}
	}
	return n
}

// checkCLISandbox creates a sandbox of template with the CLI, reads file
// in it with `forkbox exec` and kills it.
func checkCLISandbox(t *testing.T, d *daemontest.Daemon, dir, template, file, want string) {
	t.Helper()
	r := mustCLI(t, d, dir, "sandbox", "create", "--template", template, "--timeout", "120", "--json")
	var sb client.Sandbox
	if err := json.Unmarshal([]byte(r.stdout), &sb); err != nil || sb.SandboxID == "" {
		t.Fatalf("sandbox create --json: %v: %q", err, r.stdout)
	}
	defer mustCLI(t, d, dir, "sandbox", "kill", sb.SandboxID)
	if got := mustCLI(t, d, dir, "exec", sb.SandboxID, "--", "cat", file).stdout; got != want {
		t.Errorf("%s in a sandbox of %s: %q, want %q", file, template, got, want)
	}
}

// checkCreateImage: `sandbox create --image` pulls an image once, makes a
// template of it and starts a sandbox from it (a second create reuses it).
func checkCreateImage(t *testing.T, d *daemontest.Daemon, dir string) {
	t.Helper()
	for i := 0; i < 2; i++ {
		t0 := time.Now()
		r := mustCLI(t, d, dir, "sandbox", "create", "--image", "docker.io/fbx/busybox:1", "--timeout", "60", "--json")
		var sb client.Sandbox
		if err := json.Unmarshal([]byte(r.stdout), &sb); err != nil || sb.SandboxID == "" {
			t.Fatalf("sandbox create --image --json: %v: %q", err, r.stdout)
		}
		t.Logf("sandbox create --image (%d): %s", i+1, time.Since(t0).Round(time.Millisecond))
		got := mustCLI(t, d, dir, "exec", sb.SandboxID, "--", "sh", "-c", "cat /etc/motd; id -un").stdout
		mustCLI(t, d, dir, "sandbox", "kill", sb.SandboxID)
		if got != "layer two\nuser\n" {
			t.Errorf("sandbox of the image says %q", got)
		}
	}
	list := mustCLI(t, d, dir, "template", "list", "--json")
	var tpls []client.Template
	json.Unmarshal([]byte(list.stdout), &tpls)
	n := 0
	for _, tp := range tpls {
		if len(tp.Names) > 0 && strings.HasPrefix(tp.Names[0], "image-") {
			n++
			mustCLI(t, d, dir, "template", "delete", tp.TemplateID)
		}
	}
	if n != 1 {
		t.Errorf("two creates from one image made %d templates, want 1: %+v", n, tpls)
	}
}

// checkHTTP creates a sandbox of template (Go SDK) and expects its port to
// answer 200 with want in the body within 5 s (a start command the
// template's build captured running, or still starting).
func checkHTTP(t *testing.T, d *daemontest.Daemon, template string, port int, want string) {
	t.Helper()
	ctx := context.Background()
	c := client.New(d.URL, d.APIKey)
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: template, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.KillSandbox(ctx, sb.SandboxID)
	var last string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodGet, d.URL+"/", nil)
		req.Header.Set("E2b-Sandbox-Id", sb.SandboxID)
		req.Header.Set("E2b-Sandbox-Port", fmt.Sprint(port))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err.Error()
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.Contains(string(body), want) {
			return
		}
		last = fmt.Sprintf("%d %s", resp.StatusCode, body)
	}
	t.Errorf("port %d of a sandbox of %s: %s, want 200 with %q", port, template, last, want)
}
