package providers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

func userRequest(text string) providers.Request {
	return providers.Request{Model: "m", MaxOutputTokens: 64, Context: messages.AssembledContext{
		User: messages.NewMessage(messages.RoleUser, messages.Text{Text: text})}}
}

func stream(t *testing.T, ctx context.Context, p providers.Provider) (int, providers.Response, error) {
	t.Helper()
	events := 0
	resp, err := p.Stream(ctx, userRequest("hi"), func(providers.Event) error { events++; return nil })
	return events, resp, err
}

var fast = providers.RetryPolicy{MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: 50 * time.Millisecond}

func TestRetryHonoursRetryAfterThenSucceeds(t *testing.T) {
	rateLimited := &providers.Error{Provider: "fake", StatusCode: 429, Message: "slow down", Retryable: true, RetryAfter: 30 * time.Millisecond}
	f := fake.New(fake.Step{Err: rateLimited}, fake.Step{Reply: "fine now"})
	t0 := time.Now()
	_, resp, err := stream(t, context.Background(), providers.WithRetry(f, fast))
	if err != nil {
		t.Fatalf("Stream = %v, want success after one retry", err)
	}
	if f.Calls() != 2 {
		t.Errorf("calls = %d, want 2", f.Calls())
	}
	if waited := time.Since(t0); waited < 30*time.Millisecond {
		t.Errorf("retried after %v, before Retry-After (30ms)", waited)
	}
	if resp.Outcome.Kind != messages.OutcomeCompleted {
		t.Errorf("outcome = %v, want completed", resp.Outcome.Kind)
	}
}

func TestRetryGivesUpAfterMaxRetries(t *testing.T) {
	boom := &providers.Error{Provider: "fake", StatusCode: 500, Message: "boom", Retryable: true}
	f := fake.New(fake.Step{Err: boom})
	_, _, err := stream(t, context.Background(), providers.WithRetry(f, fast))
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.StatusCode != 500 {
		t.Fatalf("Stream = %v, want the 500", err)
	}
	if f.Calls() != 3 {
		t.Errorf("calls = %d, want 1 + 2 retries", f.Calls())
	}
}

func TestRetryNeverRepeatsStreamedOutput(t *testing.T) {
	f := fake.New(fake.Step{Reply: "one two three four", FailAfter: 2}, fake.Step{Reply: "again"})
	events, _, err := stream(t, context.Background(), providers.WithRetry(f, fast))
	if !providers.IsRetryable(err) || !errors.Is(err, fake.ErrConnectionReset) {
		t.Fatalf("Stream = %v, want the dropped connection", err)
	}
	if f.Calls() != 1 || events == 0 {
		t.Errorf("calls = %d, events = %d: a stream that showed output must not be retried", f.Calls(), events)
	}
}

func TestRetrySkipsPermanentErrors(t *testing.T) {
	bad := &providers.Error{Provider: "fake", StatusCode: 400, Message: "bad request"}
	f := fake.New(fake.Step{Err: bad})
	if _, _, err := stream(t, context.Background(), providers.WithRetry(f, fast)); !errors.Is(err, bad) {
		t.Fatalf("Stream = %v, want the 400", err)
	}
	if f.Calls() != 1 {
		t.Errorf("calls = %d, want 1", f.Calls())
	}
}

func TestRetryWaitEndsWithContext(t *testing.T) {
	slow := &providers.Error{Provider: "fake", StatusCode: 429, Message: "later", Retryable: true, RetryAfter: time.Hour}
	f := fake.New(fake.Step{Err: slow}, fake.Step{Reply: "never"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, _, err := stream(t, ctx, providers.WithRetry(f, providers.RetryPolicy{MaxRetries: 3, MaxDelay: time.Hour}))
	if !errors.Is(err, slow) {
		t.Fatalf("Stream = %v, want the 429 that was being waited out", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("returned after %v: the wait ignored the context", d)
	}
	if f.Calls() != 1 {
		t.Errorf("calls = %d, want 1", f.Calls())
	}
}

func TestRetryDisabledIsTheProvider(t *testing.T) {
	f := fake.New()
	if p := providers.WithRetry(f, providers.RetryPolicy{}); p != providers.Provider(f) {
		t.Errorf("WithRetry with no retries = %T, want the provider itself", p)
	}
}
