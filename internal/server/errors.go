package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// The API's error codes are package api's (api.CodeInvalid…). An error
// answer is {"error": {"code": "...", "message": "..."}} with the status
// the code implies; the proxy's routes answer in the OpenAI API's shape
// instead: {"error": {"message", "type", "param", "code"}}, same status
// and code.

// turnStatus is the status of each code a failed turn may end with.
var turnStatus = map[string]int{
	api.CodeContextTooLarge: http.StatusUnprocessableEntity,
	api.CodeCancelled:       http.StatusConflict,
	api.CodeProvider:        http.StatusBadGateway,
	// The upstream's status -> ours: 429 -> 429; 400 -> 400; 404 -> 404;
	// 401/403 -> 502 (the server's key, not the client's); 503/529 ->
	// 503; another 5xx -> 502 (api.CodeProvider).
	api.CodeProviderRateLimited:   http.StatusTooManyRequests,
	api.CodeProviderRejected:      http.StatusBadRequest,
	api.CodeProviderModelNotFound: http.StatusNotFound,
	api.CodeProviderAuth:          http.StatusBadGateway,
	api.CodeProviderOverloaded:    http.StatusServiceUnavailable,
	api.CodeInterrupted:           http.StatusServiceUnavailable,
	api.CodeProviderTimeout:       http.StatusGatewayTimeout,
	api.CodeTurnFailed:            http.StatusInternalServerError,
}

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
	// RetryAfter is the wait to send with the answer (Retry-After,
	// retry-after-ms): the model's provider's, for its rate limit.
	RetryAfter time.Duration
	// NoRetry says that sending the request again as it is is useless
	// or was done already (the runtime retried the provider): the
	// answer carries x-should-retry: false, which the OpenAI and
	// Anthropic SDKs obey.
	NoRetry bool
}

// noRetry are the codes of failed turns an SDK must not retry: the
// runtime retried the provider already, or the same request fails
// again. A rate limit is the client's to retry, when Retry-After says.
var noRetry = map[string]bool{
	api.CodeProvider:              true,
	api.CodeProviderRejected:      true,
	api.CodeProviderModelNotFound: true,
	api.CodeProviderAuth:          true,
	api.CodeProviderOverloaded:    true,
}

// turnFailed is the error of a turn that ended as last (Done), or nil if
// it did not fail; a turn whose reader went away before its end is
// unavailable (the turn goes on).
func turnFailed(turn messages.TurnID, last actors.Update) *apiError {
	switch {
	case !last.Done:
		return &apiError{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable,
			Message: "the client went away before the turn ended; it goes on", Turn: turn}
	case last.Phase != messages.PhaseFailed:
		return nil
	}
	out := failedOutcome(last)
	if last.Repeat && retryable[out.Code] {
		// Its answer invited a retry; under the same key the turn stays
		// what it was, so that retry could never succeed.
		return &apiError{Status: http.StatusConflict, Code: api.CodeKeyFailed, Turn: turn, NoRetry: true,
			Message: fmt.Sprintf("the turn first sent with this Idempotency-Key failed (%s: %s), and a repeat under the key "+
				"answers that turn: send the request again with a new Idempotency-Key", out.Code, out.Message)}
	}
	return &apiError{Status: turnStatus[out.Code], Code: out.Code, Message: out.Message, Turn: turn,
		RetryAfter: last.RetryAfter, NoRetry: noRetry[out.Code]}
}

// retryable are the codes of failed turns whose answer invites a retry:
// the same request may succeed later (the cause was a stop, a restart, or
// the provider's state).
var retryable = map[string]bool{
	api.CodeInterrupted:         true,
	api.CodeProviderRateLimited: true,
	api.CodeProviderOverloaded:  true,
	api.CodeProviderTimeout:     true,
	api.CodeProvider:            true,
}

// failedOutcome is the outcome of failed turn last, with a kind, a code
// of turnStatus and a message, whatever the update carries.
func failedOutcome(last actors.Update) messages.StepOutcome {
	out := last.Outcome
	if out.Kind == 0 {
		out = messages.FailedOutcome("", last.Err)
	}
	if _, ok := turnStatus[out.Code]; !ok {
		out.Code = api.CodeTurnFailed
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
	return &apiError{Status: http.StatusBadRequest, Code: api.CodeInvalid, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &apiError{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

// classify maps an error of the runtime to the API's code and status,
// and its message to the API's words (apiMessage).
func classify(err error) *apiError {
	var ae *apiError
	var mbe *http.MaxBytesError
	var te *actors.TimeoutError
	var busy *core.BusyError
	var unknownModel *actors.UnknownModelError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &mbe):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge, Message: fmt.Sprintf("body: over the limit of %d bytes (server.max_body_bytes)", mbe.Limit)}
	case errors.As(err, &busy):
		return &apiError{Status: http.StatusConflict, Code: api.CodeBusy, Message: busyMessage(busy)}
	case errors.As(err, &unknownModel):
		return &apiError{Status: http.StatusBadRequest, Code: api.CodeInvalid, Message: unknownModelMessage(unknownModel)}
	case errors.As(err, &te):
		ae := &apiError{Status: http.StatusGatewayTimeout, Code: api.CodeTimeout, Message: apiMessage(err), Turn: te.Turn, timeout: true}
		if te.Accepted != actors.AcceptedUnknown {
			ae.Accepted = new(te.Accepted == actors.AcceptedYes)
		}
		return ae
	}
	ae = &apiError{Status: http.StatusInternalServerError, Code: api.CodeInternal, Message: apiMessage(err)}
	switch {
	case errors.Is(err, persistence.ErrTooLarge):
		ae.Status, ae.Code = http.StatusRequestEntityTooLarge, api.CodeTooLarge
	case errors.Is(err, core.ErrBusy):
		ae.Status, ae.Code = http.StatusConflict, api.CodeBusy
	case errors.Is(err, actors.ErrNoTurnInFlight), errors.Is(err, actors.ErrHasForks), errors.Is(err, actors.ErrFirstBranch),
		errors.Is(err, persistence.ErrInUse):
		ae.Status, ae.Code = http.StatusConflict, api.CodeConflict
	case errors.Is(err, persistence.ErrNotFound), errors.Is(err, core.ErrNotCreated), errors.Is(err, actors.ErrNoRecipe),
		errors.Is(err, core.ErrNoPin):
		ae.Status, ae.Code = http.StatusNotFound, api.CodeNotFound
	case errors.Is(err, actors.ErrKeyReused):
		ae.Status, ae.Code = http.StatusUnprocessableEntity, api.CodeKeyReused
	case errors.Is(err, persistence.ErrInvalidArgument), errors.Is(err, core.ErrInvalid), errors.Is(err, actors.ErrUnknownModel),
		errors.Is(err, actors.ErrNotForkable), errors.Is(err, core.ErrDuplicate), errors.Is(err, messages.ErrInvalidID):
		ae.Status, ae.Code = http.StatusBadRequest, api.CodeInvalid
	case errors.Is(err, persistence.ErrNoSpace):
		ae.Status, ae.Code = http.StatusInsufficientStorage, api.CodeNoSpace
	case errors.Is(err, actors.ErrTimeout):
		ae.Status, ae.Code = http.StatusGatewayTimeout, api.CodeTimeout
	case errors.Is(err, actors.ErrBranchStopped), errors.Is(err, actors.ErrInterrupted), errors.Is(err, persistence.ErrClosed),
		errors.Is(err, actors.ErrNotOwner):
		ae.Status, ae.Code = http.StatusServiceUnavailable, api.CodeUnavailable
	case errors.Is(err, persistence.ErrUnavailable):
		// The driver's text names the database's address and user: the
		// server's log has it (Server.instrument), the client not.
		ae.Status, ae.Code, ae.Message = http.StatusServiceUnavailable, api.CodeUnavailable, unavailableMessage
	default:
		// Not an error the API knows: its text is the server's business
		// (Server.instrument logs it), not the client's.
		ae.Message = internalMessage
	}
	return ae
}

// unavailableMessage is the message of a call the store's database did
// not answer.
const unavailableMessage = "the store's database is unreachable; retry (the same Idempotency-Key is safe)"

// internalMessage is the message of an error the API does not know.
const internalMessage = "internal error; the server's log has the details"

// busyMessage says that a turn is in flight, in the API's words.
func busyMessage(e *core.BusyError) string {
	return fmt.Sprintf("the branch has a turn in flight (turn %s, phase %s); retry after it ends", e.Turn, e.Phase)
}

// unknownModelMessage says that a model cannot be selected, in the API's
// words.
func unknownModelMessage(e *actors.UnknownModelError) string {
	if e.Why != "" {
		return fmt.Sprintf("model: %q is configured but cannot be used: %s", e.Name, e.Why)
	}
	known := "none"
	if len(e.Configured) > 0 {
		known = strings.Join(e.Configured, ", ")
	}
	return fmt.Sprintf("model: %q is not configured; configured models: %s", e.Name, known)
}

// apiWords says in the API's words what the runtime's sentinel errors
// mean. The runtime wraps a sentinel with its context ("%w: turn %s is
// ..."), so a message is the error's text with each sentinel's own text,
// package prefix included, replaced by its words (and the ": " after it
// when the words are empty: the context says it all). A sentinel whose
// text holds another's comes first.
var apiWords = []struct {
	err   error
	words string
}{
	{persistence.ErrTooLarge, "too large"},
	{persistence.ErrBranchNotFound, "no such branch"},
	{persistence.ErrNodeNotFound, "no such turn"},
	{persistence.ErrBlobNotFound, "no such blob"},
	{persistence.ErrRowNotFound, "not found"},
	{persistence.ErrNotFound, "not found"},
	{persistence.ErrInvalidArgument, ""},
	{persistence.ErrBranchExists, "the branch exists already"},
	{persistence.ErrHeadMismatch, "the branch head is not the expected parent"},
	{persistence.ErrDuplicate, "already stored"},
	{persistence.ErrCorrupt, "stored data failed its integrity check"},
	{persistence.ErrClosed, "the store is closed (shutting down)"},
	{persistence.ErrNoSpace, "insufficient storage"},
	{core.ErrNotCreated, "the branch does not exist"},
	{core.ErrExists, "the branch exists already"},
	{core.ErrBusy, "the branch has a turn in flight"},
	{core.ErrInvalid, ""},
	{core.ErrStaleEpoch, "the summary is stale"},
	{core.ErrDuplicate, "already done"},
	{actors.ErrUnknownModel, "unknown model"},
	{actors.ErrNoTurnInFlight, "no turn in flight"},
	{actors.ErrNotForkable, "cannot fork there"},
	{actors.ErrNoRecipe, "no context was recorded for this turn"},
	{actors.ErrBranchStopped, "the branch stopped after repeated failures"},
	{actors.ErrTimeout, "the runtime did not answer in time"},
	{actors.ErrInterrupted, "the request was interrupted"},
	{messages.ErrInvalidID, "not a valid id"},
}

// apiMessage is err's text in the API's words (apiWords).
func apiMessage(err error) string {
	msg := err.Error()
	for _, w := range apiWords {
		if !errors.Is(err, w.err) {
			continue
		}
		text := w.err.Error()
		if w.words == "" {
			msg = strings.ReplaceAll(msg, text+": ", "")
		}
		msg = strings.ReplaceAll(msg, text, w.words)
	}
	return strings.TrimSpace(msg)
}

// errorShape is the shape of a request's error answers.
type errorShape int

const (
	nativeErrors    errorShape = iota // {"error": {"code", "message"}}
	openAIErrors                      // {"error": {"message", "type", "param", "code"}}
	anthropicErrors                   // {"type": "error", "error": {"type", "message"}}
)

// errorShapeOf is the shape of r's errors: Anthropic's under
// /v1/messages, and on the model APIs' other paths (/v1/models, a path
// not served) for a request of Anthropic's SDKs; OpenAI's on the model
// APIs' paths (isProxyPath); the runtime API's own elsewhere.
func errorShapeOf(r *http.Request) errorShape {
	p := r.URL.Path
	switch {
	case isAnthropicPath(p):
		return anthropicErrors
	case !isProxyPath(p):
		return nativeErrors
	case anthropicSDK(r) && !isOpenAIPath(p):
		return anthropicErrors
	}
	return openAIErrors
}

// writeError writes err as the answer to r, in r's API's shape
// (errorShapeOf).
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := classify(err)
	switch {
	case ae.RetryAfter > 0:
		setRetryAfter(w.Header(), ae.RetryAfter)
	case ae.NoRetry || ae.Code == api.CodeProviderRateLimited:
		// Not to be retried, or the provider said not when (the
		// client's SDK backs off as it does).
	case ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusServiceUnavailable || ae.Code == api.CodeBusy:
		w.Header().Set("Retry-After", "1")
	}
	if ae.NoRetry {
		w.Header().Set("X-Should-Retry", "false")
	}
	shape := errorShapeOf(r)
	if shape == anthropicErrors {
		writeJSON(w, ae.Status, anthropicError(ae.Status, ae.Message))
		return
	}
	body := map[string]any{"code": ae.Code, "message": ae.Message}
	if ae.timeout {
		body["accepted"] = ae.Accepted // null: unknown yet
	}
	switch {
	case shape == openAIErrors:
		body["type"], body["param"] = openAIErrorType(ae.Status), nil
	case !ae.Turn.IsZero():
		body["turn"] = ae.Turn
	}
	writeJSON(w, ae.Status, map[string]any{"error": body})
}

// setRetryAfter sets Retry-After (whole seconds, rounded up) and
// retry-after-ms, which the OpenAI and Anthropic SDKs read first, to d.
func setRetryAfter(h http.Header, d time.Duration) {
	h.Set("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
	h.Set("Retry-After-Ms", strconv.FormatInt(d.Milliseconds(), 10))
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
		data, _ = json.Marshal(map[string]any{"error": map[string]string{"code": api.CodeInternal,
			"message": "encode the answer: " + err.Error()}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}
