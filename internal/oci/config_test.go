package oci

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/compression"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/forkbox/forkbox/internal/errdefs"
)

func TestParseMirror(t *testing.T) {
	tests := []struct {
		in, host, url string
		ok            bool
	}{
		{"docker.io=http://127.0.0.1:5000", "docker.io", "http://127.0.0.1:5000", true},
		{"ghcr.io=https://mirror.example:443/", "ghcr.io", "https://mirror.example:443/", true},
		{"docker.io", "", "", false},
		{"=http://x", "", "", false},
		{"docker.io=ftp://x", "", "", false},
		{"docker.io=http://x/some/path", "", "", false},
		{"docker.io=127.0.0.1:5000", "", "", false},
	}
	for _, tc := range tests {
		host, u, err := ParseMirror(tc.in)
		if tc.ok != (err == nil) || host != tc.host || u != tc.url {
			t.Errorf("ParseMirror(%q) = %q, %q, %v", tc.in, host, u, err)
		}
		if err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ParseMirror(%q): error class of %v", tc.in, err)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:5000": true, "127.8.9.1": true, "localhost:80": true, "[::1]:5000": true, "::1": true,
		"10.0.0.1:5000": false, "192.168.1.2": false, "registry.test:5000": false, "docker.io": false,
	} {
		if got := isLoopback(host); got != want {
			t.Errorf("isLoopback(%q) = %v", host, got)
		}
	}
}

// TestPullMirror resolves docker.io references to a loopback mirror, and
// falls back from a dead mirror to the registry itself.
func TestPullMirror(t *testing.T) {
	mirrorReg := newRegistry(t, "", "")
	mirrorReg.push(t, "library/busybox:1.35", image(t, v1.Config{Cmd: []string{"sh"}}, compression.GZip, layerTar(t, file("m", "mirror"))))
	c := newClient(t, Options{Mirrors: map[string]string{"docker.io": "http://" + mirrorReg.host}})
	for _, ref := range []string{"busybox:1.35", "docker.io/library/busybox:1.35", "index.docker.io/library/busybox:1.35"} {
		img, err := c.Pull(context.Background(), ref, PullOptions{})
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if !strings.HasPrefix(img.Source, mirrorReg.host+"/library/busybox@") || img.Ref != ref {
			t.Errorf("%s came from %q", ref, img.Source)
		}
	}
	// The mirror's "not found" is final: no trip to Docker Hub.
	if _, err := c.Pull(context.Background(), "busybox:nope", PullOptions{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("unknown tag on the mirror: err = %v", err)
	}

	upstream := newRegistry(t, "", "")
	ref := upstream.push(t, "app:1", image(t, v1.Config{}, compression.GZip, layerTar(t, file("u", "up"))))
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadHost := dead.Addr().String()
	dead.Close()
	c = newClient(t, Options{Mirrors: map[string]string{upstream.host: "http://" + deadHost}})
	img, err := c.Pull(context.Background(), ref, PullOptions{})
	if err != nil {
		t.Fatalf("fallback from a dead mirror: %v", err)
	}
	if !strings.HasPrefix(img.Source, upstream.host+"/") {
		t.Errorf("pulled from %q", img.Source)
	}
}

// TestPullPlainHTTPPolicy: a registry that is not on loopback is spoken to
// over plain HTTP only when named insecure. The made-up hosts are dialled
// to the loopback registry, so no traffic leaves the machine.
func TestPullPlainHTTPPolicy(t *testing.T) {
	reg := newRegistry(t, "", "")
	reg.push(t, "app:1", image(t, v1.Config{}, compression.GZip, layerTar(t, file("a", "b"))))
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, reg.host)
	}
	for _, host := range []string{"registry.test:5000", "10.1.2.3:5000"} {
		c := newClient(t, Options{DialContext: dial})
		_, err := c.Pull(context.Background(), host+"/app:1", PullOptions{})
		if err == nil || !strings.Contains(err.Error(), "--insecure-registry") {
			t.Errorf("%s without --insecure-registry: err = %v", host, err)
		}
		c = newClient(t, Options{DialContext: dial, Insecure: []string{host}})
		if _, err := c.Pull(context.Background(), host+"/app:1", PullOptions{}); err != nil {
			t.Errorf("%s with --insecure-registry: %v", host, err)
		}
	}
}
