package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"
)

// Sentinel errors for errors.Is. An *Error matches the sentinel of its HTTP
// status class, so callers need not compare numbers.
var (
	// ErrBadRequest matches HTTP 400 responses.
	ErrBadRequest = errors.New("bad request")
	// ErrUnauthorized matches HTTP 401 and 403 responses.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrNotFound matches HTTP 404 responses and Connect NotFound errors.
	ErrNotFound = errors.New("not found")
	// ErrConflict matches HTTP 409 responses (for example pausing a paused
	// sandbox).
	ErrConflict = errors.New("conflict")
	// ErrTooManyRequests matches HTTP 429 responses (a quota is used up).
	ErrTooManyRequests = errors.New("too many requests")
)

// Error is an error answer of the forkbox API, decoded from its
// {"code", "message"} body.
type Error struct {
	// Status is the HTTP status code of the response.
	Status int `json:"-"`
	// Code is the "code" field of the body (usually equal to Status).
	Code int `json:"code"`
	// Message is the server's explanation.
	Message string `json:"message"`
}

// Error implements error.
func (e *Error) Error() string {
	status := e.Status
	if status == 0 {
		status = e.Code
	}
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
	}
	return fmt.Sprintf("%s (HTTP %d)", e.Message, status)
}

// Is reports whether e belongs to the class of a sentinel error.
func (e *Error) Is(target error) bool {
	status := e.Status
	if status == 0 {
		status = e.Code
	}
	switch target {
	case ErrBadRequest:
		return status == http.StatusBadRequest
	case ErrUnauthorized:
		return status == http.StatusUnauthorized || status == http.StatusForbidden
	case ErrNotFound:
		return status == http.StatusNotFound
	case ErrConflict:
		return status == http.StatusConflict
	case ErrTooManyRequests:
		return status == http.StatusTooManyRequests
	}
	return false
}

// IsNotFound reports whether err says the sandbox, snapshot or file does not
// exist, on the control API (HTTP 404) or the data plane (Connect NotFound).
func IsNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || connect.CodeOf(err) == connect.CodeNotFound
}

// IsConflict reports whether err says the sandbox is not in a state that
// allows the operation.
func IsConflict(err error) bool {
	return errors.Is(err, ErrConflict) || connect.CodeOf(err) == connect.CodeFailedPrecondition
}

// decodeError turns a non-2xx response into an *Error. Bodies that are not
// the JSON error shape (a proxy's HTML page, say) become the message, so the
// caller still sees why.
func decodeError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Status: resp.StatusCode}
	if json.Unmarshal(body, e) != nil || e.Message == "" {
		e.Message = strings.TrimSpace(string(body))
	}
	e.Status = resp.StatusCode
	if e.Code == 0 {
		e.Code = resp.StatusCode
	}
	return e
}
