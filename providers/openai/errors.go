package openai

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/contextinfinity/ctxinf/providers"
)

// codeContextTooLarge is the error code of a request over the model's
// context window.
const codeContextTooLarge = "context_length_exceeded"

// toError maps an error from the SDK to a *providers.Error: an HTTP error
// response (decoded by the SDK or not), an error event in the stream, or
// a transport failure. resp is the HTTP response received, if any.
func toError(provider string, err error, resp *http.Response) *providers.Error {
	var apiErr *oai.Error
	if errors.As(err, &apiErr) {
		return httpError(provider, apiErr.StatusCode, apiErr.Code, apiErr.Message, apiErr.Response, err)
	}
	if resp != nil && resp.StatusCode >= 400 {
		return httpError(provider, resp.StatusCode, "", "", resp, err)
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		return streamError(provider, streamErr)
	}
	return providers.TransportError(provider, "chunk", err)
}

// httpError is the error of an HTTP error response.
func httpError(provider string, status int, code, msg string, resp *http.Response, err error) *providers.Error {
	if msg == "" {
		msg = http.StatusText(status)
	}
	pe := &providers.Error{
		Provider:        provider,
		StatusCode:      status,
		Code:            code,
		Message:         msg,
		Kind:            providers.HTTPKind(status, code),
		Retryable:       status == http.StatusTooManyRequests || status >= 500,
		ContextTooLarge: code == codeContextTooLarge,
		Err:             err,
	}
	if resp != nil {
		pe.RetryAfter = providers.RetryAfter(resp.Header, time.Now())
	}
	return pe
}

// streamError is the error of an error event sent in the stream in place
// of a chunk. Server errors and rate limits are retryable.
func streamError(provider string, se *ssestream.StreamError) *providers.Error {
	var body struct {
		Error struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(se.Event.Data, &body) // a bad body keeps the SDK's message
	e := body.Error
	msg := e.Message
	if msg == "" {
		msg = se.Message
	}
	return failureError(provider, rawCode(e.Code), e.Type, msg, se)
}

// failureError is the error of a failure reported inside a stream (an
// error event, a failed response) with its code, type and message.
// Server errors and rate limits are retryable.
func failureError(provider, code, typ, msg string, err error) *providers.Error {
	return &providers.Error{
		Provider:        provider,
		Code:            code,
		Message:         msg,
		Kind:            providers.HTTPKind(0, code, typ),
		Retryable:       retryableCode(code) || retryableCode(typ),
		ContextTooLarge: code == codeContextTooLarge,
		Err:             err,
	}
}

// retryableCode reports whether an error code or type is a server error
// or a rate limit.
func retryableCode(code string) bool {
	switch code {
	case "server_error", "rate_limit_exceeded":
		return true
	}
	return false
}

// rawCode returns an error code sent as a JSON string or number.
func rawCode(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if n := strings.TrimSpace(string(raw)); n != "null" {
		return n
	}
	return ""
}
