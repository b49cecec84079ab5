package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Error codes of the API: stable, one per kind of failure. An error
// response is {"error": {"code": "...", "message": "..."}} with the
// status the code implies.
const (
	CodeInvalid      = "invalid_request"   // 400: a field is missing, malformed or out of its limits
	CodeUnauthorized = "unauthorized"      // 401: no or a wrong bearer token
	CodeNotFound     = "not_found"         // 404: no such session, branch, turn or chunk
	CodeBusy         = "turn_in_flight"    // 409: the branch has a turn in flight
	CodeConflict     = "conflict"          // 409: the request conflicts with the state (nothing to cancel)
	CodeTooLarge     = "request_too_large" // 413: the body is over the limit
	CodeOverloaded   = "overloaded"        // 429: too many requests in flight; Retry-After says when to try again
	CodeUnavailable  = "unavailable"       // 503: recovering, or shutting down
	CodeTimeout      = "timeout"           // 504: the runtime did not answer in time
	CodeInternal     = "internal"          // 500
)

// CodeNoSpace (507) says the store's disk is short of free space
// (store.min_free_bytes): new turns and sessions are refused, reads go on,
// and writes resume by themselves once space is freed.
const CodeNoSpace = "insufficient_storage"

// apiError is an error with its code and status.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func invalid(format string, args ...any) error {
	return &apiError{Status: http.StatusBadRequest, Code: CodeInvalid, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

// classify maps an error of the runtime to the API's code and status.
func classify(err error) *apiError {
	var ae *apiError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &mbe):
		return &apiError{http.StatusRequestEntityTooLarge, CodeTooLarge,
			fmt.Sprintf("the request body is over the limit of %d bytes (server.max_body_bytes)", mbe.Limit)}
	case errors.Is(err, core.ErrBusy):
		return &apiError{http.StatusConflict, CodeBusy, err.Error()}
	case errors.Is(err, actors.ErrNoTurnInFlight):
		return &apiError{http.StatusConflict, CodeConflict, err.Error()}
	case errors.Is(err, persistence.ErrNotFound), errors.Is(err, core.ErrNotCreated), errors.Is(err, actors.ErrNoRecipe):
		return &apiError{http.StatusNotFound, CodeNotFound, err.Error()}
	case errors.Is(err, persistence.ErrInvalidArgument), errors.Is(err, core.ErrInvalid), errors.Is(err, actors.ErrUnknownModel),
		errors.Is(err, actors.ErrNotForkable), errors.Is(err, core.ErrDuplicate):
		return &apiError{http.StatusBadRequest, CodeInvalid, err.Error()}
	case errors.Is(err, persistence.ErrNoSpace):
		return &apiError{http.StatusInsufficientStorage, CodeNoSpace, err.Error()}
	case errors.Is(err, actors.ErrTimeout):
		return &apiError{http.StatusGatewayTimeout, CodeTimeout, err.Error()}
	case errors.Is(err, actors.ErrBranchStopped), errors.Is(err, actors.ErrInterrupted), errors.Is(err, persistence.ErrClosed):
		return &apiError{http.StatusServiceUnavailable, CodeUnavailable, err.Error()}
	}
	return &apiError{http.StatusInternalServerError, CodeInternal, err.Error()}
}

// writeError writes err as the API's error response.
func writeError(w http.ResponseWriter, err error) {
	ae := classify(err)
	if ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, ae.Status, map[string]any{"error": map[string]string{"code": ae.Code, "message": ae.Message}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
