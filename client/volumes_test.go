package client_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/client"
)

func TestVolumes(t *testing.T) {
	_, c := newFake(t)
	ctx := context.Background()
	v, err := c.CreateVolume(ctx, "work")
	if err != nil || v.ID == "" || v.Token == "" {
		t.Fatalf("create: %+v %v", v, err)
	}
	if _, err := c.CreateVolume(ctx, "work"); !client.IsConflict(err) && !strings.Contains(err.Error(), "409") {
		t.Errorf("second create of a name: %v", err)
	}
	vs, err := c.ListVolumes(ctx)
	if err != nil || len(vs) != 1 || vs[0].Name != "work" || vs[0].Token != "" {
		t.Errorf("list: %+v %v", vs, err)
	}
	got, err := c.GetVolume(ctx, v.ID)
	if err != nil || got.Token != v.Token {
		t.Fatalf("get: %+v %v", got, err)
	}
	f := c.VolumeFiles(*got)
	if _, err := f.Write(ctx, "/a/b.txt", strings.NewReader("data")); err != nil {
		t.Fatal(err)
	}
	rd, err := f.Read(ctx, "/a/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rd)
	rd.Close()
	if string(b) != "data" {
		t.Errorf("read %q", b)
	}
	if ents, err := f.List(ctx, "/", 2); err != nil || len(ents) != 2 {
		t.Errorf("list files: %+v %v", ents, err)
	}
	if _, err := f.Read(ctx, "../etc/passwd"); err == nil {
		t.Errorf("an escape was read")
	}
	if err := f.Remove(ctx, "/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat(ctx, "/a"); !client.IsNotFound(err) {
		t.Errorf("stat after remove: %v", err)
	}
	if err := c.DeleteVolume(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
}

func TestCreateWithVolumeMounts(t *testing.T) {
	_, c := newFake(t)
	ctx := context.Background()
	v, err := c.CreateVolume(ctx, "mounted")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base",
		VolumeMounts: []client.VolumeMount{{Name: "mounted", Path: "/data"}}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.GetSandbox(ctx, sb.SandboxID)
	if err != nil || len(info.VolumeMounts) != 1 || info.VolumeMounts[0] != (client.VolumeMount{Name: "mounted", Path: "/data"}) {
		t.Fatalf("info: %+v %v", info, err)
	}
	if err := c.DeleteVolume(ctx, v.ID); !client.IsConflict(err) {
		t.Errorf("delete of a mounted volume: %v, want a conflict", err)
	}
	if err := c.KillSandbox(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteVolume(ctx, v.ID); err != nil {
		t.Error(err)
	}
}
