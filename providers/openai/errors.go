package openai

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
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
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) {
		return &providers.Error{Provider: provider, Code: "bad_stream", Message: "malformed stream chunk: " + err.Error(), Err: err}
	}
	return &providers.Error{
		Provider:  provider,
		Code:      "connection",
		Message:   "request failed: " + err.Error(),
		Retryable: transient(err),
		Err:       err,
	}
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
		Retryable:       status == http.StatusTooManyRequests || status >= 500,
		ContextTooLarge: code == codeContextTooLarge,
		Err:             err,
	}
	if resp != nil {
		pe.RetryAfter = retryAfter(resp.Header, time.Now())
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
	code := rawCode(e.Code)
	msg := e.Message
	if msg == "" {
		msg = se.Message
	}
	retryable := e.Type == "server_error" || code == "server_error" ||
		e.Type == "rate_limit_exceeded" || code == "rate_limit_exceeded"
	return &providers.Error{
		Provider:        provider,
		Code:            code,
		Message:         msg,
		Retryable:       retryable,
		ContextTooLarge: code == codeContextTooLarge,
		Err:             se,
	}
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

// transient reports whether a transport error is worth retrying: a
// network error or a connection closed or reset mid-response.
func transient(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE)
}

// maxRetryAfter bounds the wait read from a header.
const maxRetryAfter = 24 * time.Hour

// retryAfter is the wait the server asked for: retry-after-ms (OpenAI's
// own header) or Retry-After, in seconds or as an HTTP date; 0 when
// absent, unparsable or past, and at most maxRetryAfter.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil {
			return boundedWait(ms, time.Millisecond)
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		return boundedWait(secs, time.Second)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

// boundedWait is n units, 0 when n is not positive (or NaN), and at most
// maxRetryAfter.
func boundedWait(n float64, unit time.Duration) time.Duration {
	if !(n > 0) {
		return 0
	}
	if n >= float64(maxRetryAfter/unit) {
		return maxRetryAfter
	}
	return time.Duration(n * float64(unit))
}
