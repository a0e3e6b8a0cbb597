package cli

import (
	"reflect"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/client/clienttest"
)

type networkOut struct {
	SandboxID     string   `json:"sandboxID"`
	AllowInternet bool     `json:"allowInternetAccess"`
	AllowOut      []string `json:"allowOut"`
	DenyOut       []string `json:"denyOut"`
}

func TestSandboxNetwork(t *testing.T) {
	srv := clienttest.NewServer(t)
	id := mustJSON[client.Sandbox](t, srv, "sandbox", "create", "--template", "base").SandboxID
	got := mustJSON[networkOut](t, srv, "sandbox", "network", id)
	if !got.AllowInternet || len(got.AllowOut)+len(got.DenyOut) != 0 {
		t.Fatalf("fresh sandbox network %+v", got)
	}
	got = mustJSON[networkOut](t, srv, "sandbox", "network", id,
		"--deny-out", "0.0.0.0/0", "--allow-out", "api.example.com,198.51.100.0/24", "--internet=false")
	want := networkOut{SandboxID: id, AllowOut: []string{"api.example.com", "198.51.100.0/24"}, DenyOut: []string{"0.0.0.0/0"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after set: %+v, want %+v", got, want)
	}
	r := runCLI(t, srv, nil, "sandbox", "network", id)
	if r.code != 0 || !strings.Contains(r.stdout, "api.example.com, 198.51.100.0/24") || !strings.Contains(r.stdout, "no (0.0.0.0/0 denied)") {
		t.Errorf("human output %q %q", r.stdout, r.stderr)
	}
	got = mustJSON[networkOut](t, srv, "sandbox", "network", id, "--clear")
	if !got.AllowInternet || len(got.AllowOut)+len(got.DenyOut) != 0 {
		t.Errorf("after --clear: %+v", got)
	}
	if r := runCLI(t, srv, nil, "sandbox", "network", id, "--deny-out", "example.com"); r.code == 0 || !strings.Contains(r.stderr, "only valid in allowOut") {
		t.Errorf("bad rule: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, srv, nil, "sandbox", "network", id, "--clear", "--internet=false"); r.code == 0 {
		t.Errorf("--clear with a rule accepted")
	}
}
