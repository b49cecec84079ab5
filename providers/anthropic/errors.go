package anthropic

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/contextinfinity/ctxinf/providers"
)

// streamErrorPrefix starts the message of the error the SDK returns for
// an error event whose body it could not decode.
const streamErrorPrefix = "received error while streaming: "

// toError maps an error from the SDK to a *providers.Error: an HTTP error
// response (decoded by the SDK or not), an error event in the stream, or
// a transport failure. resp is the HTTP response received, if any.
func toError(provider string, err error, resp *http.Response) *providers.Error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		code, msg := errorBody([]byte(apiErr.RawJSON()))
		if code == "" {
			code = string(apiErr.Type())
		}
		if apiErr.StatusCode >= 400 {
			return httpError(provider, apiErr.StatusCode, code, msg, apiErr.Response, err)
		}
		// The response began (200) and an error event ended it.
		return streamError(provider, code, msg, err)
	}
	if resp != nil && resp.StatusCode >= 400 {
		return httpError(provider, resp.StatusCode, "", "", resp, err)
	}
	if body, ok := strings.CutPrefix(err.Error(), streamErrorPrefix); ok {
		code, msg := errorBody([]byte(body))
		if msg == "" {
			msg = body
		}
		return streamError(provider, code, msg, err)
	}
	return providers.TransportError(provider, "event", err)
}

// errorBody reads the API's error shape,
// {"type":"error","error":{"type":"…","message":"…"}}.
func errorBody(data []byte) (code, msg string) {
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) != nil {
		return "", ""
	}
	return body.Error.Type, body.Error.Message
}

// httpError is the error of an HTTP error response. 408, 409, 429 and
// 5xx (529 overloaded among them) are retryable unless the server says
// otherwise in x-should-retry; 413 and a 400 saying the prompt is too
// long mean the context is too large.
func httpError(provider string, status int, code, msg string, resp *http.Response, err error) *providers.Error {
	if msg == "" {
		msg = http.StatusText(status)
	}
	retryable := status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
	pe := &providers.Error{
		Provider:   provider,
		StatusCode: status,
		Code:       code,
		Message:    msg,
		Kind:       providers.HTTPKind(status, code),
		Retryable:  retryable,
		ContextTooLarge: status == http.StatusRequestEntityTooLarge || code == "request_too_large" ||
			(status == http.StatusBadRequest && promptTooLong(msg)),
		Err: err,
	}
	if resp != nil {
		switch strings.ToLower(strings.TrimSpace(resp.Header.Get("X-Should-Retry"))) {
		case "true":
			pe.Retryable = true
		case "false":
			pe.Retryable = false
		}
		pe.RetryAfter = providers.RetryAfter(resp.Header, time.Now())
	}
	return pe
}

// streamError is the error of an error event sent in the stream after
// the response began. Overload, server errors, timeouts and rate limits
// are retryable.
func streamError(provider, code, msg string, err error) *providers.Error {
	if msg == "" {
		msg = "error event in the stream"
	}
	retryable := false
	switch code {
	case "overloaded_error", "api_error", "timeout_error", "rate_limit_error":
		retryable = true
	}
	return &providers.Error{
		Provider:        provider,
		Code:            code,
		Message:         msg,
		Kind:            providers.CodeKind(code),
		Retryable:       retryable,
		ContextTooLarge: code == "request_too_large" || (code == "invalid_request_error" && promptTooLong(msg)),
		Err:             err,
	}
}

// promptTooLong reports whether an invalid request message says the
// prompt does not fit the context window: "prompt is too long: 210000
// tokens > 200000 maximum", "input length and `max_tokens` exceed context
// limit: …".
func promptTooLong(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"prompt is too long", "context limit", "context window", "context length"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
