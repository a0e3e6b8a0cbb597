package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// statuses maps the errdefs classes to HTTP, tested in this order: the one
// place a class becomes a status.
var statuses = []struct {
	class  error
	status int
}{
	{errdefs.ErrInvalidArgument, http.StatusBadRequest},
	{errdefs.ErrUnauthenticated, http.StatusUnauthorized},
	{errdefs.ErrForbidden, http.StatusForbidden},
	{errdefs.ErrNotFound, http.StatusNotFound},
	{errdefs.ErrAlreadyExists, http.StatusConflict},
	{errdefs.ErrConflict, http.StatusConflict},
	{errdefs.ErrResourceExhausted, http.StatusTooManyRequests},
	{errdefs.ErrUnavailable, http.StatusServiceUnavailable},
	{errdefs.ErrInternal, http.StatusInternalServerError},
}

// httpStatus maps err to the status the API answers with. Errors that
// carry no class are internal errors.
func httpStatus(err error) int {
	for _, c := range statuses {
		if errors.Is(err, c.class) {
			return c.status
		}
	}
	return http.StatusInternalServerError
}

// apiError is the error body of every control-API answer: {code, message}.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// writeError answers err with the status of its errdefs class and the E2B
// error shape. This is the only place a class becomes a status:
//
//	ErrInvalidArgument (bad JSON, bad timeout, bad query) → 400
//	ErrUnauthenticated → 401, ErrForbidden → 403
//	ErrNotFound (unknown sandbox, template or snapshot) → 404
//	ErrAlreadyExists, ErrConflict (state forbids the call) → 409
//	ErrResourceExhausted → 429, ErrUnavailable → 503
//	anything else → 500 (the message is kept generic).
//
// An unknown templateID on create is a 404, as E2B answers it.
func writeError(w http.ResponseWriter, err error) {
	e := toAPIError(err, "internal error")
	if e.Code == http.StatusInternalServerError {
		noteCause(w, err)
	}
	writeStatus(w, e.Code, e.Message)
}

// toAPIError renders err as an {code, message} body, with the status of
// its errdefs class. Internal errors (500) carry internalMsg instead of
// their own text, which may name host paths.
func toAPIError(err error, internalMsg string) apiError {
	status := httpStatus(err)
	msg := err.Error()
	if status == http.StatusInternalServerError {
		msg = internalMsg
	}
	return apiError{Code: status, Message: msg}
}

// writeStatus writes an {code, message} body with status.
func writeStatus(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, apiError{Code: status, Message: msg})
}

// writeJSON writes v as the JSON body of a status answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"code":500,"message":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}

// maxBodyBytes bounds control-API request bodies.
const maxBodyBytes = 1 << 20

// decodeBody decodes the JSON body of r into v. An empty body leaves v as
// it is when optional, and is an error otherwise. Unknown fields are
// ignored (newer SDKs send fields forkbox does not use); malformed JSON or a
// field of the wrong type is an ErrInvalidArgument.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	data, err := readBody(w, r)
	if err != nil {
		return err
	}
	return decodeJSON(data, v, optional)
}

// readBody reads r's body, at most maxBodyBytes of it.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return nil, fmt.Errorf("read body: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	return data, nil
}

// decodeJSON is decodeBody of a body already read.
func decodeJSON(data []byte, v any, optional bool) error {
	if len(strings.TrimSpace(string(data))) == 0 {
		if optional {
			return nil
		}
		return fmt.Errorf("request body is required: %w", errdefs.ErrInvalidArgument)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("bad request body: %s: %w", describeJSONError(err), errdefs.ErrInvalidArgument)
	}
	return nil
}

// describeJSONError words a decoding error for the client.
func describeJSONError(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return fmt.Sprintf("field %q must be %s, not %s", typeErr.Field, typeErr.Type, typeErr.Value)
	}
	return err.Error()
}
