package providers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// Helpers the HTTP adapters share.

// Transient reports whether a transport error is worth retrying: a
// network error or a connection closed or reset mid-response.
func Transient(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE)
}

// MaxRetryAfter bounds the wait RetryAfter reads from a header.
const MaxRetryAfter = 24 * time.Hour

// RetryAfter is the wait a server asked for: retry-after-ms or
// Retry-After, in seconds or as an HTTP date; 0 when absent, unparsable
// or past, and at most MaxRetryAfter.
func RetryAfter(h http.Header, now time.Time) time.Duration {
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
		return min(t.Sub(now), MaxRetryAfter)
	}
	return 0
}

// boundedWait is n units, 0 when n is not positive (or NaN), and at most
// MaxRetryAfter.
func boundedWait(n float64, unit time.Duration) time.Duration {
	if !(n > 0) {
		return 0
	}
	if n >= float64(MaxRetryAfter/unit) {
		return MaxRetryAfter
	}
	return time.Duration(n * float64(unit))
}

// OutcomeCode is the Failed outcome's code for err: its error code, else
// its HTTP status ("http_503").
func OutcomeCode(err *Error) string {
	if err.Code == "" && err.StatusCode != 0 {
		return "http_" + strconv.Itoa(err.StatusCode)
	}
	return err.Code
}

// CompactJSON returns data compacted when it is valid JSON, else nil.
func CompactJSON(data []byte) json.RawMessage {
	var buf bytes.Buffer
	if len(data) == 0 || json.Compact(&buf, data) != nil {
		return nil
	}
	return buf.Bytes()
}

// SentJSON is the request body an SDK sent, for a step's record, given
// encoded, the body the provider encoded and handed it: encoded itself
// when the SDK sent it unchanged, which spares compacting 10 KB again on
// the way to the step's commit; else sent compacted, or encoded when
// sent is not valid JSON.
func SentJSON(encoded json.RawMessage, sent []byte) json.RawMessage {
	if bytes.Equal(encoded, sent) {
		return encoded
	}
	if c := CompactJSON(sent); c != nil {
		return c
	}
	return encoded
}

// Exchange records the request body an SDK sent and the HTTP response it
// got, for the step record (the raw request as sent) and for errors the
// SDK could not decode. The body is the JSON request only: keys travel in
// headers. Its Middleware fits the SDKs' option.WithMiddleware.
type Exchange struct {
	Body     []byte
	Response *http.Response
}

// Middleware copies the request body, then passes the request on.
func (x *Exchange) Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	if req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			x.Body, _ = io.ReadAll(rc)
			_ = rc.Close()
		}
	}
	resp, err := next(req)
	x.Response = resp
	return resp, err
}

// FailedOutcome is the outcome of a step that failed with err; code ""
// is "provider_error".
func FailedOutcome(code string, err error) messages.StepOutcome {
	if code == "" {
		code = "provider_error"
	}
	return messages.StepOutcome{Kind: messages.OutcomeFailed, Code: code, Message: err.Error()}
}

// EmitFailed is the error and outcome of a stream stopped because its
// consumer's emit failed with err.
func EmitFailed(provider string, err error) (messages.StepOutcome, error) {
	err = fmt.Errorf("%s: emit: %w", provider, err)
	return messages.StepOutcome{Kind: messages.OutcomeFailed, Code: "emit", Message: err.Error()}, err
}

// TransportError is the error of a call that got no usable answer and no
// error response: a stream event the SDK could not decode (code
// bad_stream, what names the event's kind), or a failed connection (code
// connection, retryable when Transient).
func TransportError(provider, what string, err error) *Error {
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) {
		return &Error{Provider: provider, Code: "bad_stream", Message: "malformed stream " + what + ": " + err.Error(), Err: err}
	}
	return &Error{Provider: provider, Code: "connection", Message: "request failed: " + err.Error(), Retryable: Transient(err), Err: err}
}
