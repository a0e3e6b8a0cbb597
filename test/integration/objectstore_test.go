package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/minio/minio-go/v7"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
	"github.com/forkbox/forkbox/internal/images/s3test"
	"github.com/forkbox/forkbox/internal/oci/ocitest"
)

// startOnS3 runs a daemon whose images live in srv's bucket under prefix.
func startOnS3(t *testing.T, srv *s3test.Server, prefix string) (*daemontest.Daemon, *client.Client) {
	d := daemontest.Start(t, daemontest.Options{
		ExtraArgs: []string{"--object-store", srv.URL(prefix), "--image-cache-size", "8GiB"},
		Env:       srv.Env(),
	})
	return d, client.New(d.URL, d.APIKey)
}

// objects lists the keys under prefix in srv's bucket.
func objects(t *testing.T, srv *s3test.Server, prefix string) []string {
	t.Helper()
	var keys []string
	for o := range srv.Client().ListObjects(context.Background(), srv.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list %s: %v", prefix, o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// cacheEntries counts the images in the daemon's local cache.
func cacheEntries(d *daemontest.Daemon) int {
	ents, _ := os.ReadDir(filepath.Join(d.DataDir, "image-cache", "objects"))
	return len(ents)
}

// TestObjectStoreImages: with --object-store a paused sandbox's image is in
// S3; with the local cache wiped (and the daemon restarted) the resume
// downloads it and the Python process's memory is intact; a snapshot and a
// template build are in S3 too and usable after the restart.
func TestObjectStoreImages(t *testing.T) {
	ctx := daemontestContext(t)
	srv := s3test.Start(t)
	d, c := startOnS3(t, srv, "fbx")
	sb := create(t, ctx, c, client.CreateOptions{})
	conn := sb.Conn()
	startState(t, ctx, conn)
	writeFile(t, ctx, conn, "/tmp/on-s3", "kept")
	sh(t, ctx, conn, "echo 'export FBX_VAR=in-memory' > /tmp/v.sh")

	snap, err := c.Snapshot(ctx, sb.SandboxID, "s3")
	if err != nil {
		t.Fatal(err)
	}
	if keys := objects(t, srv, "fbx/images/snapshots/"+snap.SnapshotID); len(keys) != 1 {
		t.Fatalf("snapshot %s's manifest in S3: %v", snap.SnapshotID, keys)
	}
	host := ocitest.Host(ocitest.Registry(t))
	ocitest.Push(t, host, "fbx/busybox:1", v1.Config{Env: []string{"PATH=/bin"}}, []v1.Layer{ocitest.BusyboxLayer(t, nil)})
	tk, st := buildTemplate(t, ctx, c, "on-s3", client.TemplateBuildSpec{FromImage: host + "/fbx/busybox:1",
		Steps: []client.TemplateStep{{Type: "RUN", Args: []string{"echo built > /built", "root"}}}})
	if st.Status != "ready" {
		t.Fatalf("template build: %+v", st)
	}
	if len(objects(t, srv, "fbx/content/layers/")) == 0 || len(objects(t, srv, "fbx/content/templates/")) == 0 {
		t.Fatalf("the build's layers and image are not in S3: %v", objects(t, srv, "fbx/content/"))
	}

	tok, n := readState(ctx, conn)
	if err := c.Pause(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, func() bool { return len(objects(t, srv, "fbx/images/paused/"+sb.SandboxID)) == 1 })

	// A wiped local disk: everything comes back from S3.
	d.Terminate()
	if err := os.RemoveAll(filepath.Join(d.DataDir, "image-cache")); err != nil {
		t.Fatal(err)
	}
	d.Restart()
	c = client.New(d.URL, d.APIKey)
	if got := state(t, ctx, c, sb.SandboxID); got != "paused" {
		t.Fatalf("after the restart the sandbox is %q, want paused", got)
	}
	before := cacheEntries(d)
	if _, err := c.Connect(ctx, sb.SandboxID, 0); err != nil {
		t.Fatalf("resume from S3: %v\n%s", err, d.Log())
	}
	if cacheEntries(d) <= before {
		t.Errorf("the resume did not download the image into the cache (%d entries before, %d after)", before, cacheEntries(d))
	}
	// The restarted node's metrics count that download and the cache's
	// lookups.
	_, text := scrape(t, ctx, d.URL, d.APIKey)
	for _, series := range []string{`forkbox_image_cache_lookups_total{result="miss"}`, `forkbox_object_store_images_total{direction="down"}`,
		`forkbox_object_store_bytes_total{direction="down"}`, `forkbox_object_store_transfer_seconds_total{direction="down"}`, `forkbox_image_cache_images`} {
		if v := metric(text, series); v <= 0 {
			t.Errorf("%s = %v after a resume that downloaded its image, want > 0", series, v)
		}
	}
	checkContinues(t, ctx, conn, tok, n)
	if got := readFile(t, ctx, conn, "/tmp/on-s3"); got != "kept" {
		t.Errorf("file after resume from S3: %q", got)
	}
	if got := sh(t, ctx, conn, ". /tmp/v.sh; echo $FBX_VAR"); got != "in-memory" {
		t.Errorf("variable after resume: %q", got)
	}
	if len(objects(t, srv, "fbx/images/paused/")) != 0 {
		t.Error("the pause image is still listed in S3 after the resume")
	}

	fromSnap := create(t, ctx, c, client.CreateOptions{TemplateID: snap.SnapshotID})
	if got := readFile(t, ctx, fromSnap.Conn(), "/tmp/on-s3"); got != "kept" {
		t.Errorf("sandbox from the S3 snapshot reads %q", got)
	}
	fromTpl := create(t, ctx, c, client.CreateOptions{TemplateID: tk.TemplateID})
	if got := readFile(t, ctx, fromTpl.Conn(), "/built"); strings.TrimSpace(got) != "built" {
		t.Errorf("sandbox from the template built before the restart reads %q", got)
	}
}

// TestObjectStoreDownDuringPause: with the S3 server killed a pause fails
// with a clear error, no image is listed, and the sandbox runs on with its
// memory; once the server is back a pause and a resume work.
func TestObjectStoreDownDuringPause(t *testing.T) {
	ctx := daemontestContext(t)
	srv := s3test.Start(t)
	d, c := startOnS3(t, srv, "down")
	sb := create(t, ctx, c, client.CreateOptions{})
	conn := sb.Conn()
	startState(t, ctx, conn)
	tok, n := readState(ctx, conn)

	srv.Kill()
	if err := c.Pause(ctx, sb.SandboxID); err != nil {
		t.Fatalf("pause request: %v", err)
	}
	waitFor(t, 3*time.Minute, func() bool { return state(t, ctx, c, sb.SandboxID) == "running" })
	if log := d.Log(); !strings.Contains(log, "object store unavailable") || !strings.Contains(log, "the sandbox runs on from it") {
		t.Errorf("the daemon's log does not say the object store was unavailable and the sandbox was restarted from its image:\n%s", log)
	}
	checkContinues(t, ctx, conn, tok, n)
	if list, _, err := c.ListSandboxes(ctx, client.ListOptions{State: []string{"paused"}}); err != nil || len(list) != 0 {
		t.Errorf("paused list with the store down: %v %v", list, err)
	}
	if _, err := c.Snapshot(ctx, sb.SandboxID, ""); !isStatus(err, http.StatusServiceUnavailable) {
		t.Errorf("snapshot with the store down: %v, want 503", err)
	}

	srv.Restart()
	if keys := objects(t, srv, "down/images/"); len(keys) != 0 {
		t.Errorf("half-written images listed after the failures: %v", keys)
	}
	if err := c.Pause(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, func() bool { return len(objects(t, srv, "down/images/paused/"+sb.SandboxID)) == 1 })
	if _, err := c.Connect(ctx, sb.SandboxID, 0); err != nil {
		t.Fatalf("resume after the store came back: %v", err)
	}
	checkContinues(t, ctx, conn, tok, n)
}

// TestObjectStoreServeRefuses: `forkbox serve` with a bad --object-store
// URL, an unreachable store or a bad --image-cache-size exits non-zero in
// bounded time and says why.
func TestObjectStoreServeRefuses(t *testing.T) {
	bin := daemontest.BinDir(t)
	cases := []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--object-store", "s3://Bad_Name/x"}, nil, "a bucket name is"},
		{[]string{"--object-store", "https://bucket/x"}, nil, "the scheme must be s3"},
		{[]string{"--object-store", "s3://forkbox/x"}, []string{"AWS_ENDPOINT_URL=http://127.0.0.1:1", "AWS_ACCESS_KEY_ID=a", "AWS_SECRET_ACCESS_KEY=b"}, "object store unavailable"},
		{[]string{"--image-cache-size", "lots"}, nil, "--image-cache-size"},
	}
	for _, c := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
			"--template-dir", daemontest.TemplateDir(t), "--runsc", filepath.Join(bin, "runsc"),
			"--agent", filepath.Join(bin, "forkbox-agent"), "--network-index", fmt.Sprint(daemontest.NetworkIndex())}, c.args...)
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "forkbox"), args...)
		cmd.Env = append(os.Environ(), c.env...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil || timedOut || !strings.Contains(string(out), c.want) {
			t.Errorf("serve %v: err %v after %v, output:\n%s\nwant a non-zero exit saying %q", c.args, err, time.Since(start), out, c.want)
		}
	}
}
