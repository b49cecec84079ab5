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
	overloaded := &providers.Error{Provider: "fake", StatusCode: 503, Message: "slow down", Retryable: true, RetryAfter: 30 * time.Millisecond}
	f := fake.New(fake.Step{Err: overloaded}, fake.Step{Reply: "fine now"})
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

// A rate limit that says when to come back goes straight back to the
// caller; one that does not is retried once, after at most a second,
// whatever MaxRetries allows: the caller's own retries (an SDK's) must
// not multiply with the runtime's.
func TestRetryRateLimits(t *testing.T) {
	t.Parallel()
	slow := providers.RetryPolicy{MaxRetries: 3, BaseDelay: time.Millisecond, MaxDelay: time.Hour}
	tests := []struct {
		name      string
		err       *providers.Error
		then      fake.Step
		wantCalls int
		wantErr   bool
	}{
		{"retry-after", &providers.Error{Provider: "fake", StatusCode: 429, Retryable: true, RetryAfter: time.Hour}, fake.Step{Reply: "never"}, 1, true},
		{"no retry-after, then success", &providers.Error{Provider: "fake", StatusCode: 429, Retryable: true}, fake.Step{Reply: "fine"}, 2, false},
		{"no retry-after, twice", &providers.Error{Provider: "fake", StatusCode: 429, Retryable: true}, fake.Step{Err: &providers.Error{
			Provider: "fake", StatusCode: 429, Retryable: true}}, 2, true},
		{"stream event", &providers.Error{Provider: "fake", Code: "rate_limit_error", Retryable: true}, fake.Step{Err: &providers.Error{
			Provider: "fake", Code: "rate_limit_error", Retryable: true}}, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := fake.New(fake.Step{Err: tt.err}, tt.then)
			t0 := time.Now()
			_, _, err := stream(t, context.Background(), providers.WithRetry(f, slow))
			if (err != nil) != tt.wantErr || f.Calls() != tt.wantCalls {
				t.Fatalf("Stream = %v after %d calls, want error %v after %d", err, f.Calls(), tt.wantErr, tt.wantCalls)
			}
			if d := time.Since(t0); d > 10*time.Second {
				t.Errorf("returned after %v: a rate limit waits at most %v", d, providers.RateLimitWait)
			}
		})
	}
}

func TestErrorKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want providers.ErrorKind
	}{
		{&providers.Error{StatusCode: 429}, providers.KindRateLimited},
		{&providers.Error{StatusCode: 400, Code: "invalid_request_error"}, providers.KindRejected},
		{&providers.Error{StatusCode: 401}, providers.KindAuth},
		{&providers.Error{StatusCode: 403, Code: "permission_error"}, providers.KindAuth},
		{&providers.Error{StatusCode: 404, Code: "model_not_found"}, providers.KindModelNotFound},
		{&providers.Error{StatusCode: 500}, providers.KindServer},
		{&providers.Error{StatusCode: 503}, providers.KindOverloaded},
		{&providers.Error{StatusCode: 529, Code: "overloaded_error"}, providers.KindOverloaded},
		{&providers.Error{Code: "overloaded_error"}, providers.KindOverloaded},
		{&providers.Error{Code: "connection"}, providers.KindUnknown},
		{&providers.Error{StatusCode: 500, Kind: providers.KindRejected}, providers.KindRejected},
		{errors.New("not a provider's"), providers.KindUnknown},
	}
	for _, tt := range tests {
		if got := providers.KindOf(tt.err); got != tt.want {
			t.Errorf("KindOf(%v) = %v, want %v", tt.err, got, tt.want)
		}
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
	slow := &providers.Error{Provider: "fake", StatusCode: 503, Message: "later", Retryable: true, RetryAfter: time.Hour}
	f := fake.New(fake.Step{Err: slow}, fake.Step{Reply: "never"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, _, err := stream(t, ctx, providers.WithRetry(f, providers.RetryPolicy{MaxRetries: 3, MaxDelay: time.Hour}))
	if !errors.Is(err, slow) {
		t.Fatalf("Stream = %v, want the 503 that was being waited out", err)
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
