package providers

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// RetryPolicy bounds the retries of a provider call that failed with a
// retryable error (429, 5xx, a dropped connection) before it streamed
// anything. A call that already streamed output is never retried: what
// the user saw must not be shown twice, so the step ends with the error.
//
// A rate limit is retried less, so that the runtime's retries and those
// of its own client (an SDK retries a 429 too) do not multiply: a 429
// that says when to come back (Retry-After) goes straight back to the
// caller, who is told when; one that does not is retried once, after
// at most RateLimitWait.
//
// Its defaults are the configuration's runtime.provider_max_retries,
// provider_retry_base_delay and provider_retry_max_delay
// (internal/config), which internal/wiring maps onto it.
type RetryPolicy struct {
	MaxRetries int           // retries after the first attempt; 0: none
	BaseDelay  time.Duration // backoff before the first retry; doubles each retry
	MaxDelay   time.Duration // cap on every wait, a Retry-After included
}

// RateLimitWait caps the wait before the one retry of a rate limit that
// said not how long to wait.
const RateLimitWait = time.Second

// WithRetry returns p with retries by policy. Waits end early when ctx
// does.
func WithRetry(p Provider, policy RetryPolicy) Provider {
	if policy.MaxRetries <= 0 {
		return p
	}
	return &retrying{Provider: p, policy: policy}
}

type retrying struct {
	Provider
	policy RetryPolicy
}

func (r *retrying) Stream(ctx context.Context, req Request, emit func(Event) error) (Response, error) {
	limited := 0 // rate limits retried
	for attempt := 0; ; attempt++ {
		emitted := false
		resp, err := r.Provider.Stream(ctx, req, func(ev Event) error {
			emitted = true
			return emit(ev)
		})
		if err == nil || emitted || attempt >= r.policy.MaxRetries || !IsRetryable(err) || ctx.Err() != nil {
			return resp, err
		}
		wait := r.policy.delay(attempt, err)
		if KindOf(err) == KindRateLimited {
			if asError(err).RetryAfter > 0 || limited > 0 {
				return resp, err // the caller is told when to come back, or it was retried once
			}
			limited++
			wait = min(wait, RateLimitWait)
		}
		if werr := Sleep(ctx, wait); werr != nil {
			return resp, err // cancelled while waiting: report the failure that made us wait
		}
	}
}

// delay is the wait before retry attempt+1: the provider's Retry-After
// if it sent one, else BaseDelay·2^attempt with jitter (half fixed, half
// random), both capped by MaxDelay.
func (p RetryPolicy) delay(attempt int, err error) time.Duration {
	var d time.Duration
	if pe := asError(err); pe != nil && pe.RetryAfter > 0 {
		d = pe.RetryAfter
	} else {
		d = p.BaseDelay << min(attempt, 30)
		if d > 0 {
			d = d/2 + rand.N(d/2+1)
		}
	}
	if p.MaxDelay > 0 && (d > p.MaxDelay || d < 0) {
		d = p.MaxDelay
	}
	return d
}

func asError(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// Sleep waits d, or until ctx is done and then returns ctx.Err(). With
// d <= 0 it only checks ctx. Adapters use it for pacing and backoff.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
