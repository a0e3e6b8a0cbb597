package integration

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
)

// TestVolumesSurviveRestarts: a volume and a sandbox mounting it outlive a
// SIGKILL of the daemon and a clean stop; the running sandbox keeps
// writing to the volume through both, the content API sees its writes,
// and killing the sandbox then deleting the volume leaves nothing on the
// host (no attach directory, no mount, no image).
func TestVolumesSurviveRestarts(t *testing.T) {
	ctx := daemontest.Context(t)
	d := daemontest.Start(t, daemontest.Options{ExtraArgs: []string{"--volume-size", "16"}})
	c := client.New(d.URL, d.APIKey)
	v, err := c.CreateVolume(ctx, "restart")
	if err != nil {
		t.Fatal(err)
	}
	files := c.VolumeFiles(*v)
	if _, err := files.Write(ctx, "/api.txt", strings.NewReader("api")); err != nil {
		t.Fatal(err)
	}
	sb := create(t, ctx, c, client.CreateOptions{TemplateID: "base", VolumeMounts: []client.VolumeMount{{Name: "restart", Path: "/data"}}})
	conn := sb.Conn()
	cid := containerOf(t, d, sb.SandboxID)
	writeFile(t, ctx, conn, "/data/one.txt", "one")

	d.Kill9()
	d.Restart()
	if got := readFile(t, ctx, conn, "/data/api.txt"); got != "api" {
		t.Errorf("after a SIGKILL restart the sandbox reads %q", got)
	}
	writeFile(t, ctx, conn, "/data/two.txt", "two")
	d.Terminate()
	d.Restart()
	writeFile(t, ctx, conn, "/data/three.txt", "three")
	for _, name := range []string{"one", "two", "three"} {
		if got := readVolume(t, ctx, files, "/"+name+".txt"); got != name {
			t.Errorf("content API after the restarts: %s.txt = %q", name, got)
		}
	}
	if vs, err := c.ListVolumes(ctx); err != nil || len(vs) != 1 || vs[0].ID != v.ID {
		t.Errorf("volumes after the restarts: %+v %v", vs, err)
	}
	if err := c.DeleteVolume(ctx, v.ID); !client.IsConflict(err) {
		t.Errorf("delete of a mounted volume: %v, want a conflict", err)
	}
	if err := c.KillSandbox(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteVolume(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(d.DataDir, "runtime", "volumes", cid), filepath.Join(d.DataDir, "volumes", v.ID)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is left on the host (%v)", p, err)
		}
	}
	for _, dir := range []string{filepath.Join(d.DataDir, "volumes"), filepath.Join(d.DataDir, "runtime", "volumes")} {
		if m := mountsWith(dir); m != "" {
			t.Errorf("volume mounts left: %s", m)
		}
	}
}

func readVolume(t *testing.T, ctx context.Context, f *client.VolumeFiles, p string) string {
	t.Helper()
	rd, err := f.Read(ctx, p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	defer rd.Close()
	b, _ := io.ReadAll(rd)
	return string(b)
}

// mountsWith lists the host mounts under dir.
func mountsWith(dir string) string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir) {
			out = append(out, f[4])
		}
	}
	return strings.Join(out, ", ")
}
