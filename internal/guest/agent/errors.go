package agent

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"syscall"

	"connectrpc.com/connect"
)

// fsError converts a file system error into a Connect error with the code
// the SDKs map to their own exceptions (NotFoundError, ...).
func fsError(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	return connect.NewError(fsCode(err), err)
}

// fsCode classifies a file system error.
func fsCode(err error) connect.Code {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return connect.CodeNotFound
	case errors.Is(err, fs.ErrExist), errors.Is(err, syscall.ENOTEMPTY):
		return connect.CodeAlreadyExists
	case errors.Is(err, fs.ErrPermission):
		return connect.CodePermissionDenied
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR),
		errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ELOOP):
		return connect.CodeInvalidArgument
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return connect.CodeResourceExhausted
	case errors.Is(err, errUnknownUser):
		return connect.CodeUnauthenticated
	default:
		return connect.CodeInternal
	}
}

// httpStatus maps the same classification onto HTTP status codes for the
// /files routes.
func httpStatus(err error) int {
	switch fsCode(err) {
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodeAlreadyExists, connect.CodeInvalidArgument:
		return http.StatusBadRequest
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeResourceExhausted:
		return http.StatusInsufficientStorage
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	default:
		return http.StatusInternalServerError
	}
}

// writeJSONError writes envd's error body {"code", "message"}.
func writeJSONError(w http.ResponseWriter, status int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": status, "message": err.Error()})
}

// writeJSON writes v as a JSON response body with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
