package providers

import (
	"bytes"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/contextinfinity/ctxinf/messages"
)

// MinSecretBytes is the length under which NewScrubber ignores a secret:
// replacing a short string everywhere would mangle unrelated text, and
// no provider issues keys that short.
const MinSecretBytes = 8

// keyPatterns are the shapes of API keys a Scrubber removes even when it
// was given no secret: OpenAI's (sk-…, sk-proj-…) and Anthropic's
// (sk-ant-…) keys, and any bearer credential.
var keyPatterns = regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,}|\b(?:Bearer|bearer|BEARER)\s+[A-Za-z0-9._~+/=-]{16,}`)

// mayHoldKey is a cheap test for keyPatterns: false when s cannot match.
func mayHoldKey(s string) bool {
	return strings.Contains(s, "sk-") || strings.Contains(s, "earer") || strings.Contains(s, "EARER")
}

// mayHoldKeyBytes is mayHoldKey for bytes.
func mayHoldKeyBytes(b []byte) bool {
	return bytes.Contains(b, []byte("sk-")) || bytes.Contains(b, []byte("earer")) || bytes.Contains(b, []byte("EARER"))
}

// Scrubber removes known secrets (the configured API keys and server
// tokens) and anything shaped like an API key from the errors the runtime
// stores and logs, replacing each with DefaultReplacement. A nil
// *Scrubber removes the key shapes only. It is safe for concurrent use.
type Scrubber struct {
	secrets []string // longest first, so that a key holding another goes whole
}

// NewScrubber returns a Scrubber of secrets; empty ones and those shorter
// than MinSecretBytes are ignored.
func NewScrubber(secrets ...string) *Scrubber {
	s := &Scrubber{}
	for _, sec := range secrets {
		if sec = strings.TrimSpace(sec); len(sec) >= MinSecretBytes && !slices.Contains(s.secrets, sec) {
			s.secrets = append(s.secrets, sec)
		}
	}
	slices.SortFunc(s.secrets, func(a, b string) int { return len(b) - len(a) })
	return s
}

// String returns text without the secrets.
func (s *Scrubber) String(text string) string {
	if s != nil {
		for _, sec := range s.secrets {
			if strings.Contains(text, sec) {
				text = strings.ReplaceAll(text, sec, DefaultReplacement)
			}
		}
	}
	if mayHoldKey(text) {
		text = keyPatterns.ReplaceAllString(text, DefaultReplacement)
	}
	return text
}

// Bytes returns b without the secrets: b itself when it holds none. As
// DefaultReplacement has no quote nor backslash, valid JSON stays valid.
func (s *Scrubber) Bytes(b []byte) []byte {
	if !s.dirty(b) {
		return b
	}
	return []byte(s.String(string(b)))
}

func (s *Scrubber) dirty(b []byte) bool {
	if s != nil {
		for _, sec := range s.secrets {
			if bytes.Contains(b, []byte(sec)) {
				return true
			}
		}
	}
	return mayHoldKeyBytes(b) && keyPatterns.Match(b)
}

// Error returns err with every message in its chain scrubbed: err itself
// when none holds a secret. A *Error is copied with its Message and Code
// scrubbed, so errors.As still finds it (and its Retryable, StatusCode,
// ContextTooLarge); any other error with a secret in its chain becomes
// one with the scrubbed message whose Unwrap gives its cause scrubbed.
// A cause that holds no secret is kept as it is, so errors.Is still
// matches context.Canceled and the like.
func (s *Scrubber) Error(err error) error {
	if err == nil || !s.chainDirty(err) {
		return err
	}
	if pe, ok := err.(*Error); ok {
		c := *pe
		c.Message, c.Code = s.String(pe.Message), s.String(pe.Code)
		c.Err = s.Error(pe.Err)
		return &c
	}
	se := &scrubbedError{msg: s.String(err.Error())}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		se.causes = []error{s.Error(u.Unwrap())}
	case interface{ Unwrap() []error }:
		for _, c := range u.Unwrap() {
			se.causes = append(se.causes, s.Error(c))
		}
	}
	return se
}

// chainDirty reports whether the message of err or of any error in its
// chain holds a secret.
func (s *Scrubber) chainDirty(err error) bool {
	if err == nil {
		return false
	}
	if s.dirty([]byte(err.Error())) {
		return true
	}
	if pe, ok := err.(*Error); ok && s.dirty([]byte(pe.Message+" "+pe.Code)) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return s.chainDirty(u.Unwrap())
	case interface{ Unwrap() []error }:
		return slices.ContainsFunc(u.Unwrap(), s.chainDirty)
	}
	return false
}

// scrubbedError is an error whose message held a secret.
type scrubbedError struct {
	msg    string
	causes []error
}

func (e *scrubbedError) Error() string { return e.msg }

func (e *scrubbedError) Unwrap() []error { return e.causes }

// Outcome returns o with its code, message and reason scrubbed.
func (s *Scrubber) Outcome(o messages.StepOutcome) messages.StepOutcome {
	o.Code, o.Message, o.Reason = s.String(o.Code), s.String(o.Message), s.String(o.Reason)
	return o
}

// Writer returns a writer that scrubs what it is given before writing it
// to w. Each Write is scrubbed on its own: a zerolog writer writes one
// event per call, so a secret in a log line never reaches w.
func (s *Scrubber) Writer(w io.Writer) io.Writer { return scrubWriter{s: s, w: w} }

type scrubWriter struct {
	s *Scrubber
	w io.Writer
}

func (sw scrubWriter) Write(p []byte) (int, error) {
	if _, err := sw.w.Write(sw.s.Bytes(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Response scrubs a step's end: err, and when the step failed (err is
// not nil or the outcome is not completed, incomplete or paused) its
// outcome and raw response. The raw response of a step that succeeded
// is the model's output and kept as it came.
func (s *Scrubber) Response(resp Response, err error) (Response, error) {
	switch resp.Outcome.Kind {
	case messages.OutcomeCompleted, messages.OutcomeIncomplete, messages.OutcomePaused:
		if err == nil {
			return resp, nil
		}
	}
	resp.Outcome = s.Outcome(resp.Outcome)
	resp.RawResponse = s.Bytes(resp.RawResponse)
	return resp, s.Error(err)
}
