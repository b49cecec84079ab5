package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Error codes of the API: stable, one per kind of failure. An error
// response is {"error": {"code": "...", "message": "..."}} with the
// status the code implies; the error of a turn that failed also names
// the turn ("turn"). The proxy's routes answer in the OpenAI API's shape
// instead: {"error": {"message", "type", "param", "code"}}, same status
// and code.
const (
	CodeInvalid      = "invalid_request"        // 400: a field is missing, malformed or out of its limits
	CodeUnauthorized = "unauthorized"           // 401: no or a wrong bearer token
	CodeNotFound     = "not_found"              // 404: no such session, branch, turn, chunk or pin
	CodeBusy         = "turn_in_flight"         // 409: the branch has a turn in flight; Retry-After says when to try again
	CodeConflict     = "conflict"               // 409: the request conflicts with the state (nothing to cancel)
	CodeTooLarge     = "request_too_large"      // 413: the body, or what it would store, is over the limit
	CodeKeyReused    = "idempotency_key_reused" // 422: the Idempotency-Key was first sent with another request
	CodeOverloaded   = "overloaded"             // 429: too many requests in flight; Retry-After says when to try again
	CodeUnavailable  = "unavailable"            // 503: recovering, or shutting down
	CodeTimeout      = "timeout"                // 504: the runtime did not answer in time; "accepted" says whether the request was carried out
	CodeInternal     = "internal"               // 500

	// The codes of a turn that was accepted and then failed (the turn's
	// outcome code, messages.Fail*): a turn waited for answers with
	// them; a streamed one ends with a "done" event whose outcome
	// carries the code.
	CodeContextTooLarge = messages.FailContextTooLarge // 422: the context does not fit the model's window, even shrunk; the message names the sections and the keys to change
	CodeCancelled       = messages.FailCancelled       // 409: the turn was cancelled (POST .../cancel)
	CodeProvider        = messages.FailProvider        // 502: the model's provider refused or failed the request (a 401, a 400, a 5xx after retries)
	CodeInterrupted     = messages.FailInterrupted     // 503: the server stopped or restarted, or the branch failed, during the turn; Retry-After
	CodeProviderTimeout = messages.FailProviderTimeout // 504: the provider took longer than runtime.provider_timeout
	CodeTurnFailed      = messages.FailTurn            // 500: the turn failed for another reason, which the message names
)

// turnStatus is the status of each code a failed turn may end with.
var turnStatus = map[string]int{
	CodeContextTooLarge: http.StatusUnprocessableEntity,
	CodeCancelled:       http.StatusConflict,
	CodeProvider:        http.StatusBadGateway,
	CodeInterrupted:     http.StatusServiceUnavailable,
	CodeProviderTimeout: http.StatusGatewayTimeout,
	CodeTurnFailed:      http.StatusInternalServerError,
}

// CodeNoSpace (507) says the store's disk is short of free space
// (store.min_free_bytes): new turns and sessions are refused, reads go on,
// and writes resume by themselves once space is freed.
const CodeNoSpace = "insufficient_storage"

// apiError is an error with its code and status; Turn names the turn
// that failed, if the error is a turn's.
type apiError struct {
	Status  int
	Code    string
	Message string
	Turn    messages.TurnID
	// Accepted, on a time-out (504) of a request that stores something,
	// says whether it was carried out: true (stored), false (nothing was
	// stored: send it again) or unknown (nil, written as null; the
	// turn's row or a repeat under the same Idempotency-Key tells).
	Accepted *bool
	timeout  bool // Accepted is set
}

// turnFailed is the error of a turn that ended as last (Done), or nil if
// it did not fail; a turn whose reader went away before its end is
// unavailable (the turn goes on).
func turnFailed(turn messages.TurnID, last actors.Update) *apiError {
	switch {
	case !last.Done:
		return &apiError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: "the client went away before the turn ended; it goes on", Turn: turn}
	case last.Phase != messages.PhaseFailed:
		return nil
	}
	out := failedOutcome(last)
	return &apiError{Status: turnStatus[out.Code], Code: out.Code, Message: out.Message, Turn: turn}
}

// failedOutcome is the outcome of failed turn last, with a kind, a code
// of turnStatus and a message, whatever the update carries.
func failedOutcome(last actors.Update) messages.StepOutcome {
	out := last.Outcome
	if out.Kind == 0 {
		out = messages.FailedOutcome("", last.Err)
	}
	if _, ok := turnStatus[out.Code]; !ok {
		out.Code = CodeTurnFailed
	}
	if out.Message == "" {
		out.Message = last.Err
	}
	if out.Message == "" {
		out.Message = "the turn failed"
	}
	return out
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
	var te *actors.TimeoutError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &mbe):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Message: fmt.Sprintf("the request body is over the limit of %d bytes (server.max_body_bytes)", mbe.Limit)}
	case errors.Is(err, persistence.ErrTooLarge):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Message: err.Error()}
	case errors.Is(err, core.ErrBusy):
		return &apiError{Status: http.StatusConflict, Code: CodeBusy, Message: err.Error() +
			"; send the turn again once that one has its response (Retry-After), or through the OpenAI-compatible proxy, which queues a conversation's turns"}
	case errors.Is(err, actors.ErrNoTurnInFlight):
		return &apiError{Status: http.StatusConflict, Code: CodeConflict, Message: err.Error()}
	case errors.Is(err, core.ErrNoPin):
		return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Message: err.Error()}
	case errors.Is(err, persistence.ErrNotFound), errors.Is(err, core.ErrNotCreated), errors.Is(err, actors.ErrNoRecipe):
		return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Message: err.Error()}
	case errors.Is(err, persistence.ErrInvalidArgument), errors.Is(err, core.ErrInvalid), errors.Is(err, actors.ErrUnknownModel),
		errors.Is(err, actors.ErrNotForkable), errors.Is(err, core.ErrDuplicate):
		return &apiError{Status: http.StatusBadRequest, Code: CodeInvalid, Message: err.Error()}
	case errors.Is(err, persistence.ErrNoSpace):
		return &apiError{Status: http.StatusInsufficientStorage, Code: CodeNoSpace, Message: err.Error()}
	case errors.Is(err, actors.ErrKeyReused):
		return &apiError{Status: http.StatusUnprocessableEntity, Code: CodeKeyReused, Message: err.Error()}
	case errors.As(err, &te):
		ae := &apiError{Status: http.StatusGatewayTimeout, Code: CodeTimeout, Message: err.Error(), Turn: te.Turn, timeout: true}
		if te.Accepted != actors.AcceptedUnknown {
			ae.Accepted = new(te.Accepted == actors.AcceptedYes)
		}
		return ae
	case errors.Is(err, actors.ErrTimeout):
		return &apiError{Status: http.StatusGatewayTimeout, Code: CodeTimeout, Message: err.Error()}
	case errors.Is(err, actors.ErrBranchStopped), errors.Is(err, actors.ErrInterrupted), errors.Is(err, persistence.ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: err.Error()}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
}

// writeError writes err as the API's error response, in the OpenAI
// API's shape on the proxy's routes (path).
func writeError(w http.ResponseWriter, path string, err error) {
	ae := classify(err)
	if ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusServiceUnavailable || ae.Code == CodeBusy {
		w.Header().Set("Retry-After", "1")
	}
	body := map[string]any{"code": ae.Code, "message": ae.Message}
	if ae.timeout {
		body["accepted"] = ae.Accepted // null: unknown yet
	}
	switch {
	case isProxyPath(path):
		body["type"], body["param"] = openAIErrorType(ae.Status), nil
	case !ae.Turn.IsZero():
		body["turn"] = ae.Turn
	}
	writeJSON(w, ae.Status, map[string]any{"error": body})
}

// openAIErrorType is the OpenAI API's error type for status.
func openAIErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// writeJSON answers v with status. A value that does not encode is a
// bug: it is answered as an internal error naming it, never as an empty
// body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data, _ = json.Marshal(map[string]any{"error": map[string]string{"code": CodeInternal,
			"message": "encode the answer: " + err.Error()}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}
