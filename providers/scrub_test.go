package providers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/messages"
)

const testKey = "my-configured-key-0123456789"

func TestScrubberString(t *testing.T) {
	s := NewScrubber(testKey, "short", "")
	for in, want := range map[string]string{
		"Incorrect API key provided: " + testKey + ".":             "Incorrect API key provided: [redacted].",
		"key sk-proj-abcdefghijklmnopqrstuvwxyz012 bad":            "key [redacted] bad",
		"anthropic sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA-BBBB end": "anthropic [redacted] end",
		"Authorization: Bearer abcdefghijklmnop0123":               "Authorization: [redacted]",
		"short words and sk-short stay":                            "short words and sk-short stay",
	} {
		if got := s.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
	var none *Scrubber
	if got := none.String("x sk-abcdefghijklmnopqrstuvwxyz y " + testKey); got != "x [redacted] y "+testKey {
		t.Errorf("nil String = %q", got)
	}
}

func TestScrubberError(t *testing.T) {
	s := NewScrubber(testKey)
	if err := s.Error(context.Canceled); err != context.Canceled {
		t.Errorf("Error(clean) = %v, want it unchanged", err)
	}
	cause := fmt.Errorf("POST /v1/responses: 401 {\"message\":\"bad key %s\"}", testKey)
	pe := &Error{Provider: "openai", StatusCode: 401, Message: "Incorrect API key provided: " + testKey, Err: cause}
	got := s.Error(fmt.Errorf("step: %w", pe))
	var gotPE *Error
	if !errors.As(got, &gotPE) || gotPE.StatusCode != 401 {
		t.Fatalf("errors.As lost the *Error: %v", got)
	}
	for _, msg := range []string{got.Error(), gotPE.Message, gotPE.Err.Error()} {
		if strings.Contains(msg, testKey) || !strings.Contains(msg, DefaultReplacement) {
			t.Errorf("scrubbed message %q", msg)
		}
	}
	if pe.Message != "Incorrect API key provided: "+testKey {
		t.Errorf("the original error was changed: %q", pe.Message)
	}
	// A clean cause under a dirty wrapper is kept, for errors.Is.
	got = s.Error(fmt.Errorf("key %s: %w", testKey, context.DeadlineExceeded))
	if !errors.Is(got, context.DeadlineExceeded) || strings.Contains(got.Error(), testKey) {
		t.Errorf("Error = %v, want it scrubbed and still a deadline", got)
	}
}

func TestScrubberResponseAndWriter(t *testing.T) {
	s := NewScrubber(testKey)
	failed := Response{Outcome: messages.StepOutcome{Kind: messages.OutcomeFailed, Message: "bad " + testKey},
		RawResponse: []byte(`{"error":{"message":"bad ` + testKey + `"}}`)}
	resp, _ := s.Response(failed, nil)
	if strings.Contains(resp.Outcome.Message, testKey) || bytes.Contains(resp.RawResponse, []byte(testKey)) {
		t.Errorf("failed step not scrubbed: %+v %s", resp.Outcome, resp.RawResponse)
	}
	ok := Response{Outcome: messages.StepOutcome{Kind: messages.OutcomeCompleted}, RawResponse: []byte(`"talks about ` + testKey + `"`)}
	if resp, _ := s.Response(ok, nil); !bytes.Equal(resp.RawResponse, ok.RawResponse) {
		t.Errorf("a completed step's raw response was changed: %s", resp.RawResponse)
	}
	var out bytes.Buffer
	w := s.Writer(&out)
	line := `{"level":"warn","error":"openai: status 401: bad ` + testKey + `"}` + "\n"
	if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if strings.Contains(out.String(), testKey) || !strings.Contains(out.String(), `bad [redacted]"}`) {
		t.Errorf("log line %q", out.String())
	}
}

func TestScrubberLeavesWordsThatEndInSk(t *testing.T) {
	var s *Scrubber
	for _, text := range []string{"task-0123456789abcdefghijklmn", "disk-0123456789abcdefghijklmn", "a bearer of news"} {
		if got := s.String(text); got != text {
			t.Errorf("String(%q) = %q, want it unchanged", text, got)
		}
	}
}
