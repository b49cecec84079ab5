package api

import "github.com/contextinfinity/ctxinf/messages"

// Error codes of the API: stable, one per kind of failure. An error
// answer is {"error": {"code": "...", "message": "..."}} (ErrorAnswer)
// with the status the code implies; the error of a turn that failed also
// names the turn ("turn"). The proxy's routes answer in the OpenAI API's
// shape instead: {"error": {"message", "type", "param", "code"}}, same
// status and code.
const (
	CodeInvalid          = "invalid_request"        // 400: a field is missing, malformed or out of its limits
	CodeUnauthorized     = "unauthorized"           // 401: no or a wrong bearer token
	CodeNotFound         = "not_found"              // 404: no such session, branch, turn, chunk or pin
	CodeMethodNotAllowed = "method_not_allowed"     // 405: the path is not served for the method; Allow names those it is
	CodeRequestTimeout   = "request_timeout"        // 408: the request's body did not arrive within server.read_body_timeout
	CodeBusy             = "turn_in_flight"         // 409: the branch has a turn in flight; Retry-After says when to try again
	CodeConflict         = "conflict"               // 409: the request conflicts with the state (nothing to cancel)
	CodeTooLarge         = "request_too_large"      // 413: the body, or what it would store, is over the limit
	CodeKeyReused        = "idempotency_key_reused" // 422: the Idempotency-Key was first sent with another request
	CodeKeyFailed        = "idempotency_key_failed" // 409: the turn first sent with the Idempotency-Key failed in a way a retry may not (interrupted, the provider's 429 or 5xx); send it with a new key
	CodeOverloaded       = "overloaded"             // 429: too many requests in flight; Retry-After says when to try again
	CodeUnavailable      = "unavailable"            // 503: recovering, or shutting down
	CodeTimeout          = "timeout"                // 504: the runtime did not answer in time; "accepted" says whether the request was carried out
	CodeNoSpace          = "insufficient_storage"   // 507: the store's disk is short of free space (store.min_free_bytes): new turns and sessions are refused, reads go on
	CodeInternal         = "internal"               // 500

	// The codes of a turn that was accepted and then failed (the turn's
	// outcome code, messages.Fail*): a turn waited for answers with
	// them; a streamed one ends with a "done" event whose outcome
	// carries the code.
	CodeContextTooLarge = messages.FailContextTooLarge // 422: the context does not fit the model's window, even shrunk; the message names the sections and the keys to change
	CodeCancelled       = messages.FailCancelled       // 409: the turn was cancelled (POST .../cancel)
	CodeProvider        = messages.FailProvider        // 502: the model's provider failed (a 5xx after the runtime's retries, a dropped stream)
	// The model's provider answered with an error whose meaning the
	// answer keeps (its status: 429, 400, 404, 502, 503).
	CodeProviderRateLimited   = messages.FailProviderRateLimited   // 429: the provider rate limits the server; Retry-After is the provider's
	CodeProviderRejected      = messages.FailProviderRejected      // 400: the provider refused the request's content; the message is the provider's
	CodeProviderModelNotFound = messages.FailProviderModelNotFound // 404: the provider does not know the model
	CodeProviderAuth          = messages.FailProviderAuth          // 502: the provider refused the server's own key for it (not the client's)
	CodeProviderOverloaded    = messages.FailProviderOverloaded    // 503: the provider stayed overloaded through the runtime's retries
	CodeInterrupted           = messages.FailInterrupted           // 503: the server stopped or restarted, or the branch failed, during the turn; Retry-After
	CodeProviderTimeout       = messages.FailProviderTimeout       // 504: the provider took longer than runtime.provider_timeout
	CodeTurnFailed            = messages.FailTurn                  // 500: the turn failed for another reason, which the message names
)

// ErrorAnswer is the body of an error answer of the runtime API.
type ErrorAnswer struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is an error: its code and message; Turn names the turn of a
// turn that failed; Accepted, on a time-out (504, CodeTimeout) of a
// request that stores something, says whether it was carried out (true),
// not (false), or is not known yet (null).
type ErrorBody struct {
	Code     string          `json:"code"`
	Message  string          `json:"message"`
	Turn     messages.TurnID `json:"turn,omitzero"`
	Accepted *bool           `json:"accepted,omitempty"`
}
