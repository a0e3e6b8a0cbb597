// Package errdefs defines the error classes every forkbox package wraps its
// errors with. Packages return fmt.Errorf("...: %w", errdefs.ErrNotFound) and
// only the API edge (internal/server) turns a class into an HTTP status, so
// the mapping lives in exactly one place.
package errdefs

import (
	"errors"
	"net/http"
)

// The error classes. Wrap them with %w; test with errors.Is.
var (
	// ErrInvalidArgument: the request is malformed or names an impossible value.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotFound: the named sandbox, template or snapshot does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: the object to create is there already.
	ErrAlreadyExists = errors.New("already exists")
	// ErrConflict: the object exists but its state does not allow the operation
	// (pausing a paused sandbox, commands on a sandbox that is being paused).
	ErrConflict = errors.New("conflict")
	// ErrUnauthenticated: no or a wrong API key / access token.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden: the caller is known but may not do this.
	ErrForbidden = errors.New("forbidden")
	// ErrResourceExhausted: a quota (sandboxes, addresses, clones) is used up.
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrUnavailable: a dependency (runtime, agent) did not answer; retrying may work.
	ErrUnavailable = errors.New("unavailable")
	// ErrInternal: a bug or an unexpected host failure.
	ErrInternal = errors.New("internal error")
)

// classes lists the classes in the order HTTPStatus tests them.
var classes = []struct {
	err    error
	status int
}{
	{ErrInvalidArgument, http.StatusBadRequest},
	{ErrUnauthenticated, http.StatusUnauthorized},
	{ErrForbidden, http.StatusForbidden},
	{ErrNotFound, http.StatusNotFound},
	{ErrAlreadyExists, http.StatusConflict},
	{ErrConflict, http.StatusConflict},
	{ErrResourceExhausted, http.StatusTooManyRequests},
	{ErrUnavailable, http.StatusServiceUnavailable},
	{ErrInternal, http.StatusInternalServerError},
}

// HTTPStatus maps err to the status the REST API answers with. Errors that
// carry no class are internal errors.
func HTTPStatus(err error) int {
	for _, c := range classes {
		if errors.Is(err, c.err) {
			return c.status
		}
	}
	return http.StatusInternalServerError
}

// IsNotFound reports whether err is of class ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsConflict reports whether err is of class ErrConflict.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsInvalidArgument reports whether err is of class ErrInvalidArgument.
func IsInvalidArgument(err error) bool { return errors.Is(err, ErrInvalidArgument) }
