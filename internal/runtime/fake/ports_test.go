package fake

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// TestPortHandler: with PortHandler each port has its own server, a port
// without one refuses, and a stopped sandbox refuses every port.
func TestPortHandler(t *testing.T) {
	ctx := context.Background()
	r := New()
	r.PortHandler = func(id string, port int) http.Handler {
		if port == 9 {
			return nil
		}
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "%s:%d", id, port) })
	}
	spec := runtime.Spec{ID: runtime.NewID(), RootFS: t.TempDir()}
	if _, err := r.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	get := func(port int) (string, error) {
		c, err := r.Dial(ctx, spec.ID, port)
		if err != nil {
			return "", err
		}
		defer c.Close()
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var body string
		fmt.Fscan(resp.Body, &body)
		return body, nil
	}
	for _, port := range []int{80, 8080, 80} {
		if got, err := get(port); err != nil || got != fmt.Sprintf("%s:%d", spec.ID, port) {
			t.Errorf("port %d: %q %v", port, got, err)
		}
	}
	if _, err := get(9); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("port without a handler: %v, want unavailable", err)
	}
	if err := r.Kill(spec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := get(80); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("stopped sandbox: %v, want unavailable", err)
	}
}
