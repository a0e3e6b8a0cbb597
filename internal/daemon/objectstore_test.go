package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// TestObjectStoreStartErrors: a bad --object-store URL is refused with the
// reason, and a store that does not answer is a clear ErrUnavailable in
// bounded time, so serve exits non-zero instead of hanging.
func TestObjectStoreStartErrors(t *testing.T) {
	base := Options{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for url, want := range map[string]string{
		"http://bucket/prefix": "the scheme must be s3",
		"s3:///prefix":         "no bucket",
		"s3://Upper_Case/x":    "a bucket name is",
	} {
		o := base
		o.ObjectStore = url
		_, err := openObjectImages(context.Background(), o)
		if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want invalid argument saying %q", url, err, want)
		}
		// Refused with the other flags, before anything is built.
		if err := fillOptions(&o); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "--object-store") {
			t.Errorf("%s: options: %v, want invalid --object-store", url, err)
		}
	}
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	o := base
	o.ObjectStore = "s3://forkbox/images"
	start := time.Now()
	_, err := openObjectImages(context.Background(), o)
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "object store unavailable") {
		t.Errorf("unreachable store: %v, want unavailable", err)
	}
	if d := time.Since(start); d > objectStoreStartTimeout+5*time.Second {
		t.Errorf("unreachable store took %v to fail", d)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	if _, err := openObjectImages(context.Background(), o); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("no credentials: %v", err)
	}
}
