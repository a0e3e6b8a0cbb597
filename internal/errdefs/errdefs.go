// Package errdefs defines the error classes every forkbox package wraps its
// errors with. Packages return fmt.Errorf("...: %w", errdefs.ErrNotFound) and
// only the API edge turns a class into an HTTP status (internal/server's
// status table, as containerd's errdefs/pkg/errhttp does), so the mapping
// lives in exactly one place and this package knows nothing of HTTP.
package errdefs

import "errors"

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

// IsNotFound reports whether err is of class ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsConflict reports whether err is of class ErrConflict.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsInvalidArgument reports whether err is of class ErrInvalidArgument.
func IsInvalidArgument(err error) bool { return errors.Is(err, ErrInvalidArgument) }
