package oci

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// errCorrupt marks content that does not match its digest or size.
var errCorrupt = errors.New("content does not match its digest")

// classify wraps a registry error in the errdefs class a caller can act on,
// with a message naming the reference. Errors already classed pass through.
func classify(ref string, withAuth bool, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	if class := registryClass(err); class != nil {
		hint := ""
		if errors.Is(class, errdefs.ErrUnauthenticated) {
			hint = "authentication required; "
			if withAuth {
				hint = "the registry refused the credentials; "
			}
		}
		return fmt.Errorf("pull %s: %s%v: %w", ref, hint, err, class)
	}
	for _, c := range []error{errdefs.ErrInvalidArgument, errdefs.ErrForbidden, errdefs.ErrNotFound,
		errdefs.ErrUnavailable, errdefs.ErrInternal, errdefs.ErrResourceExhausted} {
		if errors.Is(err, c) {
			return fmt.Errorf("pull %s: %w", ref, err)
		}
	}
	if errors.Is(err, errCorrupt) {
		return fmt.Errorf("pull %s: %w: %w", ref, err, errdefs.ErrUnavailable)
	}
	if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return fmt.Errorf("pull %s: the registry speaks plain HTTP, which only loopback registries may "+
			"without --insecure-registry HOST: %v: %w", ref, err, errdefs.ErrUnavailable)
	}
	var nerr net.Error
	var operr *net.OpError
	var dnserr *net.DNSError
	if errors.As(err, &operr) || errors.As(err, &dnserr) || errors.As(err, &nerr) {
		return fmt.Errorf("pull %s: registry unreachable: %w: %w", ref, err, errdefs.ErrUnavailable)
	}
	return fmt.Errorf("pull %s: %w: %w", ref, err, errdefs.ErrUnavailable)
}

// registryClass maps a registry's error response to a class, or nil.
func registryClass(err error) error {
	var te *transport.Error
	if !errors.As(err, &te) {
		return nil
	}
	for _, d := range te.Errors {
		switch d.Code {
		case transport.UnauthorizedErrorCode:
			return errdefs.ErrUnauthenticated
		case transport.DeniedErrorCode:
			return errdefs.ErrForbidden
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
			return errdefs.ErrNotFound
		case transport.TooManyRequestsErrorCode:
			return errdefs.ErrResourceExhausted
		case transport.NameInvalidErrorCode, transport.TagInvalidErrorCode, transport.ManifestInvalidErrorCode:
			return errdefs.ErrInvalidArgument
		}
	}
	switch s := te.StatusCode; {
	case s == http.StatusUnauthorized:
		return errdefs.ErrUnauthenticated
	case s == http.StatusForbidden:
		return errdefs.ErrForbidden
	case s == http.StatusNotFound:
		return errdefs.ErrNotFound
	case s == http.StatusTooManyRequests:
		return errdefs.ErrResourceExhausted
	case s >= 500:
		return errdefs.ErrUnavailable
	}
	return nil
}
