package fake_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/fake"
	"github.com/contextinfinity/ctxinf/providers/local"
)

func request(text string) providers.Request {
	return providers.Request{
		Model:           "m",
		MaxOutputTokens: 100,
		Context: messages.AssembledContext{
			User: messages.NewMessage(messages.RoleUser, messages.Text{Text: text}),
		},
	}
}

// recorder collects the events of a stream; emit may run on another
// goroutine than the test's.
type recorder struct {
	mu     sync.Mutex
	events []providers.Event
}

func (r *recorder) emit(ev providers.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	return nil
}

// kinds returns the kinds of the events so far, one letter each: s for the
// start event, d for a text delta, i for an item.
func (r *recorder) kinds() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, ev := range r.events {
		switch ev.Kind {
		case providers.EventOther:
			b.WriteByte('s')
		case providers.EventTextDelta:
			b.WriteByte('d')
		case providers.EventItem:
			b.WriteByte('i')
		}
	}
	return b.String()
}

func (r *recorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, ev := range r.events {
		if ev.Kind == providers.EventTextDelta {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

// result is what a Stream call returned.
type result struct {
	resp providers.Response
	err  error
}

// start runs Stream on a new goroutine.
func start(ctx context.Context, p *fake.Provider, req providers.Request, r *recorder) <-chan result {
	ch := make(chan result, 1)
	go func() {
		resp, err := p.Stream(ctx, req, r.emit)
		ch <- result{resp, err}
	}()
	return ch
}

func responseText(resp providers.Response) string {
	var b strings.Builder
	for _, it := range resp.Items {
		if m, ok := it.(messages.AssistantMessage); ok {
			b.WriteString(m.Blocks.RenderedText())
		}
	}
	return b.String()
}

var completed = messages.StepOutcome{Kind: messages.OutcomeCompleted}

func TestEcho(t *testing.T) {
	p := fake.New()
	for _, text := range []string{"hello there", "again"} {
		var r recorder
		resp, err := p.Stream(context.Background(), request(text), r.emit)
		want := "echo: " + text
		if err != nil || responseText(resp) != want || r.text() != want || resp.Outcome != completed {
			t.Errorf("Stream(%q) = %q %+v, %v with deltas %q, want %q completed, nil",
				text, responseText(resp), resp.Outcome, err, r.text(), want)
		}
	}
}

func TestSequence(t *testing.T) {
	p := fake.New(fake.Step{Reply: "one"}, fake.Step{Reply: "two"})
	var got []string
	for i := range 4 {
		resp, err := p.Stream(context.Background(), request(fmt.Sprint("q", i)), func(providers.Event) error { return nil })
		if err != nil {
			t.Fatalf("Stream call %d = %v, want nil", i, err)
		}
		got = append(got, responseText(resp))
	}
	if want := []string{"one", "two", "two", "two"}; !slices.Equal(got, want) {
		t.Errorf("replies = %q, want %q", got, want)
	}
	if got := p.Calls(); got != 4 {
		t.Errorf("Calls() = %d, want 4", got)
	}
	reqs := p.Requests()
	var texts []string
	for _, req := range reqs {
		texts = append(texts, req.Context.User.RenderedText)
	}
	if want := []string{"q0", "q1", "q2", "q3"}; !slices.Equal(texts, want) {
		t.Errorf("Requests() user texts = %q, want %q", texts, want)
	}
	reqs[0].Model = "changed"
	if got := p.Requests()[0].Model; got != "m" {
		t.Errorf("Requests()[0].Model after changing the copy = %q, want %q", got, "m")
	}
}

func TestReplyAndItems(t *testing.T) {
	call := messages.ToolCall{CallID: "call_1", Name: "grep", Arguments: json.RawMessage(`{"q":"x"}`)}
	paused := messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}
	tests := []struct {
		name      string
		step      fake.Step
		kinds     string
		items     messages.Items
		outcome   messages.StepOutcome
		outTokens int
	}{
		{"zero step", fake.Step{}, "s", nil, completed, 0},
		{"reply", fake.Step{Reply: "a b c"}, "sddd", messages.Items{text("a b c")}, completed, 3},
		{"tool call alone", fake.Step{Items: messages.Items{call}, Outcome: paused}, "si", messages.Items{call}, paused, 0},
		{"reply then tool call", fake.Step{Reply: "let me look", Items: messages.Items{call}, Outcome: paused},
			"sdddi", messages.Items{text("let me look"), call}, paused, 3},
		{"incomplete", fake.Step{Reply: "cut", Outcome: messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "max_output_tokens"}},
			"sd", messages.Items{text("cut")}, messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "max_output_tokens"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r recorder
			resp, err := fake.New(tt.step).Stream(context.Background(), request("q"), r.emit)
			if err != nil {
				t.Fatalf("Stream = %v, want nil", err)
			}
			if got := r.kinds(); got != tt.kinds {
				t.Errorf("events = %q, want %q", got, tt.kinds)
			}
			if !reflect.DeepEqual(resp.Items, tt.items) {
				t.Errorf("Items = %+v, want %+v", resp.Items, tt.items)
			}
			if resp.Outcome != tt.outcome {
				t.Errorf("Outcome = %+v, want %+v", resp.Outcome, tt.outcome)
			}
			want := providers.Usage{InputTokens: local.Estimate(request("q").Context), OutputTokens: tt.outTokens}
			if resp.Usage != want {
				t.Errorf("Usage = %+v, want %+v", resp.Usage, want)
			}
			for _, ev := range r.events {
				if ev.Kind == providers.EventItem && (ev.Item == nil || ev.Type != fake.EventItem || len(ev.Raw) == 0) {
					t.Errorf("item event = %+v, want an item with its JSON", ev)
				}
			}
			if !json.Valid(resp.RawRequest) || !json.Valid(resp.RawResponse) {
				t.Errorf("RawRequest %s, RawResponse %s, want JSON", resp.RawRequest, resp.RawResponse)
			}
		})
	}
}

func text(s string) messages.AssistantMessage {
	return messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: s}}}
}

func TestErr(t *testing.T) {
	rateLimited := &providers.Error{Provider: "fake", StatusCode: 429, Message: "slow down", Retryable: true, RetryAfter: 3 * time.Second}
	serverError := &providers.Error{Provider: "fake", StatusCode: 500, Message: "internal", Retryable: true}
	tooLarge := &providers.Error{Provider: "fake", StatusCode: 400, Code: "context_length_exceeded", ContextTooLarge: true}
	plain := errors.New("bad config")
	tests := []struct {
		name string
		err  error
	}{
		{"429", rateLimited},
		{"500", serverError},
		{"context too large", tooLarge},
		{"plain error", plain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r recorder
			resp, err := fake.New(fake.Step{Reply: "never sent", Err: tt.err}).Stream(context.Background(), request("q"), r.emit)
			if err != tt.err {
				t.Fatalf("Stream = %v, want %v", err, tt.err)
			}
			if got := r.kinds(); got != "" {
				t.Errorf("events = %q, want none", got)
			}
			if len(resp.Items) != 0 || resp.Outcome.Kind != messages.OutcomeFailed {
				t.Errorf("response = %+v, want no items and a failed outcome", resp)
			}
		})
	}

	_, err := fake.New(fake.Step{Err: rateLimited}).Stream(context.Background(), request("q"), func(providers.Event) error { return nil })
	var pe *providers.Error
	if !errors.As(err, &pe) || !pe.Retryable || pe.RetryAfter != 3*time.Second || pe.StatusCode != 429 || !providers.IsRetryable(err) {
		t.Errorf("Stream(429 step) = %#v, want a retryable *providers.Error with status 429 and RetryAfter 3s", err)
	}
}

func TestFailAfter(t *testing.T) {
	tests := []struct {
		reply     string
		failAfter int
		want      string
	}{
		{"one two three four five", 2, "one two "},
		{"one two three", 3, "one two three"},
		{"one two", 10, "one two"},
		{"", 1, ""},
	}
	for _, tt := range tests {
		call := messages.ToolCall{CallID: "c", Name: "never"}
		p := fake.New(fake.Step{Reply: tt.reply, FailAfter: tt.failAfter, Items: messages.Items{call}}).WithName("flaky")
		var r recorder
		resp, err := p.Stream(context.Background(), request("q"), r.emit)
		var pe *providers.Error
		if !errors.As(err, &pe) || !pe.Retryable || pe.Provider != "flaky" || pe.Message != "connection reset" || !errors.Is(err, fake.ErrConnectionReset) {
			t.Fatalf("Stream(%q, FailAfter %d) = %#v, want a retryable connection reset from flaky", tt.reply, tt.failAfter, err)
		}
		if got := responseText(resp); got != tt.want || r.text() != tt.want {
			t.Errorf("Stream(%q, FailAfter %d) partial = %q, deltas %q, want %q", tt.reply, tt.failAfter, got, r.text(), tt.want)
		}
		if strings.Contains(r.kinds(), "i") || len(resp.Items) > 1 {
			t.Errorf("Stream(%q, FailAfter %d) sent items: events %q, response %+v", tt.reply, tt.failAfter, r.kinds(), resp.Items)
		}
		if resp.Outcome.Kind != messages.OutcomeFailed || resp.Usage.OutputTokens != len(local.Tokens(tt.want)) {
			t.Errorf("Stream(%q, FailAfter %d) = %+v with %d tokens, want failed with %d",
				tt.reply, tt.failAfter, resp.Outcome, resp.Usage.OutputTokens, len(local.Tokens(tt.want)))
		}
	}
}

func TestHang(t *testing.T) {
	tests := []struct {
		name  string
		step  fake.Step
		kinds string
		text  string
	}{
		{"at once", fake.Step{Hang: true}, "s", ""},
		{"after the reply", fake.Step{Reply: "a b", Hang: true, Items: messages.Items{messages.Metadata{Key: "k"}}}, "sdd", "a b"},
		{"after FailAfter tokens", fake.Step{Reply: "a b c d", FailAfter: 2, Hang: true}, "sdd", "a b "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				var r recorder
				done := start(ctx, fake.New(tt.step), request("q"), &r)
				synctest.Wait()
				select {
				case res := <-done:
					t.Fatalf("Stream returned %v before ctx was cancelled", res.err)
				default:
				}
				if got := r.kinds(); got != tt.kinds {
					t.Errorf("events while hanging = %q, want %q", got, tt.kinds)
				}
				cancel()
				res := <-done
				if !errors.Is(res.err, context.Canceled) {
					t.Errorf("Stream after cancel = %v, want %v", res.err, context.Canceled)
				}
				if got := responseText(res.resp); got != tt.text || res.resp.Outcome.Kind != messages.OutcomeCancelled {
					t.Errorf("partial response = %q %+v, want %q cancelled", got, res.resp.Outcome, tt.text)
				}
			})
		})
	}
}

func TestBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := make(chan struct{})
		p := fake.New(fake.Step{Reply: "held reply", Block: block})
		var r recorder
		done := start(context.Background(), p, request("q"), &r)
		synctest.Wait()
		select {
		case res := <-done:
			t.Fatalf("Stream returned %v before Block was closed", res.err)
		default:
		}
		if got := r.kinds(); got != "" {
			t.Errorf("events while blocked = %q, want none", got)
		}
		if got := p.Calls(); got != 1 {
			t.Errorf("Calls() while blocked = %d, want 1", got)
		}
		close(block)
		res := <-done
		if res.err != nil || responseText(res.resp) != "held reply" || r.kinds() != "sdd" {
			t.Errorf("Stream after close = %q, %v with events %q, want %q, nil with %q",
				responseText(res.resp), res.err, r.kinds(), "held reply", "sdd")
		}
	})
}

func TestBlockCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		block := make(chan struct{})
		defer close(block)
		var r recorder
		done := start(ctx, fake.New(fake.Step{Reply: "never", Block: block}), request("q"), &r)
		synctest.Wait()
		cancel()
		res := <-done
		if !errors.Is(res.err, context.Canceled) || r.kinds() != "" || len(res.resp.Items) != 0 {
			t.Errorf("Stream cancelled while blocked = %v with events %q and %d items, want %v, none, 0",
				res.err, r.kinds(), len(res.resp.Items), context.Canceled)
		}
	})
}

func TestBlockThenErr(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := make(chan struct{})
		errDown := &providers.Error{StatusCode: 503, Retryable: true}
		var r recorder
		done := start(context.Background(), fake.New(fake.Step{Block: block, Err: errDown}), request("q"), &r)
		synctest.Wait()
		select {
		case res := <-done:
			t.Fatalf("Stream returned %v before Block was closed", res.err)
		default:
		}
		close(block)
		if res := <-done; res.err != errDown {
			t.Errorf("Stream after close = %v, want %v", res.err, errDown)
		}
	})
}

func TestDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 10 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), 2*delay+delay/2)
		defer cancel()
		var times []time.Time
		begin := time.Now()
		resp, err := fake.New(fake.Step{Reply: "a b c d e", Delay: delay}).Stream(ctx, request("q"), func(ev providers.Event) error {
			if ev.Kind == providers.EventTextDelta {
				times = append(times, time.Now())
			}
			return nil
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stream = %v, want %v", err, context.DeadlineExceeded)
		}
		if got := time.Since(begin); got != 2*delay+delay/2 {
			t.Errorf("Stream returned after %v, want %v", got, 2*delay+delay/2)
		}
		for i := 1; i < len(times); i++ {
			if d := times[i].Sub(times[i-1]); d != delay {
				t.Errorf("delta %d came %v after the one before, want %v", i, d, delay)
			}
		}
		if got := responseText(resp); got != "a b c " || resp.Outcome.Kind != messages.OutcomeCancelled {
			t.Errorf("partial response = %q %+v, want %q cancelled", got, resp.Outcome, "a b c ")
		}
	})
}

func TestEmitError(t *testing.T) {
	errBoom := errors.New("boom")
	call := messages.ToolCall{CallID: "c", Name: "n"}
	tests := []struct {
		failAt int // index of the event emit fails on; 0 is the start event
		text   string
		items  int // in the partial response
	}{
		{0, "", 0},
		{2, "a ", 1},
		{3, "a b", 1}, // the tool call's event fails: it is left out
	}
	for _, tt := range tests {
		calls := 0
		emit := func(providers.Event) error {
			calls++
			if calls-1 == tt.failAt {
				return errBoom
			}
			return nil
		}
		resp, err := fake.New(fake.Step{Reply: "a b", Items: messages.Items{call}}).Stream(context.Background(), request("q"), emit)
		if !errors.Is(err, errBoom) || calls != tt.failAt+1 {
			t.Fatalf("Stream(fail at %d) = %v after %d events, want %v after %d", tt.failAt, err, calls, errBoom, tt.failAt+1)
		}
		if got := responseText(resp); got != tt.text || len(resp.Items) != tt.items || resp.Outcome.Kind != messages.OutcomeFailed {
			t.Errorf("Stream(fail at %d) partial = %q, %d items, %+v, want %q, %d items, failed",
				tt.failAt, got, len(resp.Items), resp.Outcome, tt.text, tt.items)
		}
	}
}

func TestConcurrent(t *testing.T) {
	const n = 16
	var steps []fake.Step
	for i := range n {
		steps = append(steps, fake.Step{Reply: fmt.Sprint("reply ", i)})
	}
	p := fake.New(steps...)
	replies := make(chan string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := p.Stream(context.Background(), request(fmt.Sprint(i)), func(providers.Event) error { return nil })
			if err != nil {
				t.Errorf("Stream = %v, want nil", err)
			}
			replies <- responseText(resp)
		})
	}
	wg.Wait()
	close(replies)
	var got []string
	for r := range replies {
		got = append(got, r)
	}
	slices.Sort(got)
	var want []string
	for _, s := range steps {
		want = append(want, s.Reply)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("replies = %q, want each step once: %q", got, want)
	}
	if p.Calls() != n || len(p.Requests()) != n {
		t.Errorf("Calls() = %d, len(Requests()) = %d, want %d", p.Calls(), len(p.Requests()), n)
	}
}

func TestNameAndLimit(t *testing.T) {
	p := fake.New()
	if p.Name() != "fake" || p.ContextLimit("m") != fake.DefaultContextLimit {
		t.Errorf("New() = %q with limit %d, want %q with %d", p.Name(), p.ContextLimit("m"), "fake", fake.DefaultContextLimit)
	}
	p.WithName("openai").WithContextLimit(1000)
	if p.Name() != "openai" || p.ContextLimit("m") != 1000 {
		t.Errorf("WithName, WithContextLimit = %q with limit %d, want %q with %d", p.Name(), p.ContextLimit("m"), "openai", 1000)
	}
	req := request("some words here")
	if n, err := p.EstimatePromptTokens(req); n != local.Estimate(req.Context) || err != nil {
		t.Errorf("EstimatePromptTokens = %d, %v, want %d, nil", n, err, local.Estimate(req.Context))
	}
}

// A step's Usage and Model are what the response reports, as an
// upstream's would be; without them usage is counted and the model is
// the request's.
func TestUsageAndModel(t *testing.T) {
	p := fake.New(fake.Step{Reply: "two words", Usage: &providers.Usage{InputTokens: 1234, OutputTokens: 56}, Model: "gpt-real-1"}, fake.Step{Reply: "two words"})
	resp, err := p.Stream(context.Background(), request("hi"), (&recorder{}).emit)
	if err != nil || resp.Usage != (providers.Usage{InputTokens: 1234, OutputTokens: 56}) || resp.Model != "gpt-real-1" {
		t.Errorf("scripted: usage %+v, model %q, err %v", resp.Usage, resp.Model, err)
	}
	req := request("hi")
	resp, err = p.Stream(context.Background(), req, (&recorder{}).emit)
	if want := (providers.Usage{InputTokens: local.Estimate(req.Context), OutputTokens: 2}); err != nil || resp.Usage != want || resp.Model != "m" {
		t.Errorf("counted: usage %+v, model %q, err %v; want %+v, m", resp.Usage, resp.Model, err, want)
	}
}

// A tool choice the real adapters reject fails the call as theirs do.
func TestBadToolChoice(t *testing.T) {
	p := fake.New(fake.Step{Reply: "ok"})
	req := request("hi")
	req.Context.ToolMode = messages.ToolsEnabled
	req.Context.Tools = []messages.Tool{{Name: "grep"}}
	req.Context.ToolChoice = messages.ToolChoice{Mode: "tool", Name: "rm"}
	r := &recorder{}
	resp, err := p.Stream(context.Background(), req, r.emit)
	if !errors.Is(err, providers.ErrInvalidToolChoice) || resp.Outcome.Code != "bad_request" || r.kinds() != "" || p.Calls() != 1 {
		t.Errorf("err %v, outcome %+v, events %q, calls %d", err, resp.Outcome, r.kinds(), p.Calls())
	}
	req.Context.ToolChoice = messages.ToolChoice{Mode: "tool", Name: "grep"}
	if _, err := p.Stream(context.Background(), req, r.emit); err != nil {
		t.Errorf("a valid choice: %v", err)
	}
}
