package clienttest_test

import (
	"context"
	"testing"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/client/clienttest"
)

func TestAddSandbox(t *testing.T) {
	srv := clienttest.NewServer(t)
	c := client.New(srv.URL, clienttest.APIKey)
	ctx := context.Background()
	tests := []struct {
		name  string
		info  client.SandboxInfo
		state string
	}{
		{"defaults", client.SandboxInfo{}, "running"},
		{"metadata", client.SandboxInfo{Metadata: map[string]string{"k": "v"}}, "running"},
		{"paused", client.SandboxInfo{State: "paused"}, "paused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(srv.Requests())
			id := srv.AddSandbox(tt.info)
			if n := len(srv.Requests()); n != before {
				t.Errorf("AddSandbox recorded %d requests", n-before)
			}
			info, err := c.GetSandbox(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if info.State != tt.state || info.TemplateID != clienttest.Template || info.Metadata["k"] != tt.info.Metadata["k"] {
				t.Errorf("info %+v", info)
			}
			if got := srv.Sandbox(id); got == nil || got.State != tt.state {
				t.Errorf("Sandbox(%s) = %+v", id, got)
			}
			if err := c.KillSandbox(ctx, id); err != nil {
				t.Fatal(err)
			}
			if got := srv.Sandbox(id); got != nil {
				t.Errorf("Sandbox after kill = %+v", got)
			}
		})
	}
}

// TestDataPlaneOfPausedSandbox shows the daemon's proxy, not the fake
// agent, answering for a paused sandbox; resuming brings its files back.
func TestDataPlaneOfPausedSandbox(t *testing.T) {
	srv := clienttest.NewServer(t)
	c := client.New(srv.URL, clienttest.APIKey)
	ctx := context.Background()
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: clienttest.Template, Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Conn().WriteFile(ctx, "/tmp/kept", []byte("memory")); err != nil {
		t.Fatal(err)
	}
	if err := c.Pause(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Conn().ReadFile(ctx, "/tmp/kept"); err == nil {
		t.Error("read from a paused sandbox succeeded")
	}
	if _, err := c.Connect(ctx, sb.SandboxID, 0); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.Conn().ReadFile(ctx, "/tmp/kept"); err != nil || string(got) != "memory" {
		t.Errorf("after resume read %q, %v", got, err)
	}
}
