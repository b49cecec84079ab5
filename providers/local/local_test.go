package local_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"reflect"
	"strings"
	"testing"
	"testing/quick"
	"testing/synctest"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/local"
)

func user(text string) messages.Message {
	return messages.NewMessage(messages.RoleUser, messages.Text{Text: text})
}

func assistant(text string) messages.Message {
	return messages.NewMessage(messages.RoleAssistant, messages.Text{Text: text})
}

// fullContext has something in every section Reply reports.
func fullContext() messages.AssembledContext {
	return messages.AssembledContext{
		SystemInstructions: "You are helpful.",
		PinnedFacts:        []string{"The project is in Go.", "Tests run with -race."},
		Summary:            "We set up the module and the store.", // 36 chars: 9 tokens
		Window:             []messages.Message{user("hello"), assistant("hi"), user("status?")},
		Pending: []messages.Message{
			user("Rename the config flag to --data-dir, please, and update the docs"),
			assistant("Done."),
			user("Add a test"),
		},
		Retrieved: []messages.RetrievedChunk{{Text: "old chunk"}},
		User:      user("What did I ask before?"),
	}
}

func TestReply(t *testing.T) {
	long := strings.Repeat("abcdefghij", 9) // 90 chars
	tests := []struct {
		name string
		c    messages.AssembledContext
		want string
	}{
		{
			name: "empty",
			c:    messages.AssembledContext{},
			want: `[local] I received your message (0 words): "". Context: 0 pinned facts, summary of 0 tokens, 0 window messages, 0 pending turns, 0 retrieved chunks.`,
		},
		{
			name: "one of each",
			c: messages.AssembledContext{
				PinnedFacts: []string{"x"},
				Summary:     "abcd",
				Window:      []messages.Message{user("a")},
				Pending:     []messages.Message{user("first")},
				Retrieved:   []messages.RetrievedChunk{{Text: "c"}},
				User:        user("hi"),
			},
			want: `[local] I received your message (1 word): "hi". Context: 1 pinned fact, summary of 1 token, 1 window message, 1 pending turn, 1 retrieved chunk. Pending turns: #1 "first".`,
		},
		{
			name: "full",
			c:    fullContext(),
			want: `[local] I received your message (5 words): "What did I ask before?". Context: 2 pinned facts, summary of 9 tokens, 3 window messages, 2 pending turns, 1 retrieved chunk. Pending turns: #1 "Rename the config flag to --data-dir, pl…" #2 "Add a test".`,
		},
		{
			name: "long user text is cut at 80 characters",
			c:    messages.AssembledContext{User: user(long)},
			want: `[local] I received your message (1 word): "` + long[:80] + `…". Context: 0 pinned facts, summary of 0 tokens, 0 window messages, 0 pending turns, 0 retrieved chunks.`,
		},
		{
			name: "white space is folded and quotes escaped",
			c:    messages.AssembledContext{User: user("  say\n\n\"hi\"\tnow ")},
			want: `[local] I received your message (3 words): "say \"hi\" now". Context: 0 pinned facts, summary of 0 tokens, 0 window messages, 0 pending turns, 0 retrieved chunks.`,
		},
		{
			name: "user text from blocks when RenderedText is empty",
			c: messages.AssembledContext{User: messages.Message{Role: messages.RoleUser,
				Blocks: messages.Blocks{messages.Text{Text: "from "}, messages.Text{Text: "blocks"}}}},
			want: `[local] I received your message (2 words): "from blocks". Context: 0 pinned facts, summary of 0 tokens, 0 window messages, 0 pending turns, 0 retrieved chunks.`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := local.Reply(tt.c); got != tt.want {
				t.Errorf("Reply(%s) =\n%s\nwant\n%s", tt.name, got, tt.want)
			}
		})
	}
}

func TestTokens(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   ", []string{"   "}},
		{"word", []string{"word"}},
		{"two words", []string{"two ", "words"}},
		{"  lead and trail  ", []string{"  lead ", "and ", "trail  "}},
		{"a\n\tb  c", []string{"a\n\t", "b  ", "c"}},
		{"héllo wörld…", []string{"héllo ", "wörld…"}},
	}
	for _, tt := range tests {
		if got := local.Tokens(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Tokens(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTokensConcatenate(t *testing.T) {
	f := func(s string) bool {
		toks := local.Tokens(s)
		for _, tok := range toks {
			if tok == "" {
				return false
			}
		}
		return strings.Join(toks, "") == s
	}
	if err := quick.Check(f, nil); err != nil {
		t.Error(err)
	}
}

func TestEstimate(t *testing.T) {
	tests := []struct {
		name string
		c    messages.AssembledContext
		want int
	}{
		{"empty: the user message alone", messages.AssembledContext{}, 4},
		{"rounds up", messages.AssembledContext{User: user("hello")}, 2 + 4},
		{"counts runes, not bytes", messages.AssembledContext{User: user("éééé")}, 1 + 4},
		{
			name: "every section",
			c: messages.AssembledContext{
				SystemInstructions: "sys!",                                          // 4
				PinnedFacts:        []string{"ab", "cd"},                            // 4
				Summary:            "summ",                                          // 4
				Window:             []messages.Message{user("wwww")},                // 4, +1 message
				Pending:            []messages.Message{user("pp"), assistant("pp")}, // 4, +2
				Retrieved:          []messages.RetrievedChunk{{Text: "rrrr"}},       // 4
				User:               user("uuuu"),                                    // 4
				Continuation: messages.Items{ // +2 items
					messages.ToolCall{CallID: "c", Name: "ab", Arguments: json.RawMessage(`{}`)}, // 4
					messages.ToolOutput{CallID: "c", Output: json.RawMessage(`"ok"`)},            // 4
				},
				Tools: []messages.Tool{{Name: "ab", Description: "cd"}}, // 4
			},
			want: 40/4 + 4*(1+1+2+2),
		},
		{
			name: "blocks: tool use and result count, an image its tokens, not its bytes",
			c: messages.AssembledContext{User: messages.Message{Role: messages.RoleUser, Blocks: messages.Blocks{
				messages.ToolUse{ToolUseID: "t", Name: "ab", Input: json.RawMessage(`{}`)},                 // 4
				messages.ToolResult{ToolUseID: "t", Content: messages.Blocks{messages.Text{Text: "1234"}}}, // 4
				messages.Image{MediaType: "image/png", Source: json.RawMessage(`{"type":"url","url":"https://example.com/a.png"}`)},
			}}},
			want: 2 + 4 + providers.ImageTokensDefault,
		},
		{
			name: "an image of known size in the window and in a tool result",
			c: messages.AssembledContext{Window: []messages.Message{{Role: messages.RoleUser, Blocks: messages.Blocks{
				messages.Image{MediaType: "image/png", Source: pngSource(t, 100, 50)}, // 255: 85 + 170 for one tile
				messages.ToolResult{ToolUseID: "t", Content: messages.Blocks{
					messages.Image{MediaType: "image/png", Source: pngSource(t, 100, 50)}}},
			}}}},
			want: 4 + 4 + 2*255,
		},
	}
	for _, tt := range tests {
		if got := local.Estimate(tt.c); got != tt.want {
			t.Errorf("Estimate(%s) = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// pngSource is the base64 image source of a w×h PNG.
func pngSource(t *testing.T, w, h int) json.RawMessage {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	src, err := json.Marshal(map[string]string{"type": "base64", "data": base64.StdEncoding.EncodeToString(buf.Bytes())})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestProvider(t *testing.T) {
	if got := local.New(local.Options{}).Name(); got != "local" {
		t.Errorf("Name() = %q, want %q", got, "local")
	}
	for _, tt := range []struct {
		opt, want int
	}{{0, local.DefaultContextLimit}, {-1, local.DefaultContextLimit}, {1000, 1000}} {
		if got := local.New(local.Options{ContextLimit: tt.opt}).ContextLimit("any"); got != tt.want {
			t.Errorf("New(ContextLimit: %d).ContextLimit = %d, want %d", tt.opt, got, tt.want)
		}
	}
	req := providers.Request{Context: fullContext()}
	n, err := local.New(local.Options{}).EstimatePromptTokens(req)
	if want := local.Estimate(req.Context); n != want || err != nil {
		t.Errorf("EstimatePromptTokens = %d, %v, want %d, nil", n, err, want)
	}
}

// recorder collects the events of a stream.
type recorder struct {
	events []providers.Event
}

func (r *recorder) emit(ev providers.Event) error {
	r.events = append(r.events, ev)
	return nil
}

func (r *recorder) text() string {
	var b strings.Builder
	for _, ev := range r.events {
		if ev.Kind == providers.EventTextDelta {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

func (r *recorder) deltas() int {
	n := 0
	for _, ev := range r.events {
		if ev.Kind == providers.EventTextDelta {
			n++
		}
	}
	return n
}

// responseText returns the text of resp's assistant messages.
func responseText(t *testing.T, resp providers.Response) string {
	t.Helper()
	var b strings.Builder
	for _, it := range resp.Items {
		m, ok := it.(messages.AssistantMessage)
		if !ok {
			t.Fatalf("response item %T, want AssistantMessage", it)
		}
		b.WriteString(m.Blocks.RenderedText())
	}
	return b.String()
}

func TestStream(t *testing.T) {
	tests := []struct {
		name string
		c    messages.AssembledContext
	}{
		{"empty", messages.AssembledContext{}},
		{"full", fullContext()},
		{"odd white space", messages.AssembledContext{User: user("\n  a  b\t")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := providers.Request{Model: "m", Context: tt.c, MaxOutputTokens: 1000}
			var r recorder
			resp, err := local.New(local.Options{}).Stream(context.Background(), req, r.emit)
			if err != nil {
				t.Fatalf("Stream = %v, want nil", err)
			}
			reply := local.Reply(tt.c)
			if got := responseText(t, resp); got != reply {
				t.Errorf("response text = %q, want %q", got, reply)
			}
			if got := r.text(); got != reply {
				t.Errorf("concatenated deltas = %q, want %q", got, reply)
			}
			if len(r.events) == 0 || r.events[0].Kind != providers.EventOther || r.events[0].Type != local.EventStart {
				t.Fatalf("first event = %+v, want an EventOther %q", r.events[0], local.EventStart)
			}
			for i, ev := range r.events[1:] {
				var raw struct{ Delta string }
				if err := json.Unmarshal(ev.Raw, &raw); err != nil || raw.Delta != ev.Text {
					t.Errorf("event %d Raw = %s (%v), want {\"delta\":%q}", i+1, ev.Raw, err, ev.Text)
				}
				if ev.Kind != providers.EventTextDelta || ev.Index != 0 || ev.Type != local.EventDelta {
					t.Errorf("event %d = %+v, want an EventTextDelta at 0 of type %q", i+1, ev, local.EventDelta)
				}
			}
			if want := (messages.StepOutcome{Kind: messages.OutcomeCompleted}); resp.Outcome != want {
				t.Errorf("Outcome = %+v, want %+v", resp.Outcome, want)
			}
			want := providers.Usage{InputTokens: local.Estimate(tt.c), OutputTokens: len(local.Tokens(reply))}
			if resp.Usage != want || r.deltas() != want.OutputTokens {
				t.Errorf("Usage = %+v with %d deltas, want %+v", resp.Usage, r.deltas(), want)
			}
			var rawResp struct{ Text string }
			if err := json.Unmarshal(resp.RawResponse, &rawResp); err != nil || rawResp.Text != reply {
				t.Errorf("RawResponse = %s (%v), want {\"text\":%q}", resp.RawResponse, err, reply)
			}
			var rawReq struct {
				Model        string `json:"model"`
				PendingTurns int    `json:"pending_turns"`
				UserText     string `json:"user_text"`
			}
			if err := json.Unmarshal(resp.RawRequest, &rawReq); err != nil {
				t.Fatalf("RawRequest = %s: %v", resp.RawRequest, err)
			}
			if rawReq.Model != "m" || rawReq.UserText != tt.c.User.RenderedText {
				t.Errorf("RawRequest = %s, want model %q and user_text %q", resp.RawRequest, "m", tt.c.User.RenderedText)
			}
		})
	}
}

func TestStreamDeterministic(t *testing.T) {
	p := local.New(local.Options{})
	req := providers.Request{Model: "m", Context: fullContext(), MaxOutputTokens: 1000}
	var r1, r2 recorder
	resp1, err1 := p.Stream(context.Background(), req, r1.emit)
	resp2, err2 := p.Stream(context.Background(), req, r2.emit)
	if err1 != nil || err2 != nil {
		t.Fatalf("Stream = %v, %v, want nil, nil", err1, err2)
	}
	if !reflect.DeepEqual(resp1, resp2) {
		t.Errorf("Stream twice = %+v and %+v, want the same", resp1, resp2)
	}
	if !reflect.DeepEqual(r1.events, r2.events) {
		t.Errorf("Stream twice emitted %+v and %+v, want the same", r1.events, r2.events)
	}
	// A different context gives a different reply.
	req.Context.Pending = req.Context.Pending[:1]
	resp3, _ := p.Stream(context.Background(), req, func(providers.Event) error { return nil })
	if reflect.DeepEqual(resp1.RawResponse, resp3.RawResponse) {
		t.Errorf("Stream with fewer pending turns = %s, want a different reply", resp3.RawResponse)
	}
}

func TestStreamMaxOutputTokens(t *testing.T) {
	c := fullContext()
	toks := local.Tokens(local.Reply(c))
	completed := messages.StepOutcome{Kind: messages.OutcomeCompleted}
	incomplete := messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "max_output_tokens"}
	tests := []struct {
		max     int
		tokens  int
		outcome messages.StepOutcome
	}{
		{0, len(toks), completed},
		{1, 1, incomplete},
		{5, 5, incomplete},
		{len(toks) - 1, len(toks) - 1, incomplete},
		{len(toks), len(toks), completed},
		{len(toks) + 1, len(toks), completed},
	}
	for _, tt := range tests {
		var r recorder
		resp, err := local.New(local.Options{}).Stream(context.Background(),
			providers.Request{Context: c, MaxOutputTokens: tt.max}, r.emit)
		if err != nil {
			t.Fatalf("Stream(max %d) = %v, want nil", tt.max, err)
		}
		want := strings.Join(toks[:tt.tokens], "")
		if got := responseText(t, resp); got != want || r.text() != want {
			t.Errorf("Stream(max %d) text = %q, deltas %q, want %q", tt.max, got, r.text(), want)
		}
		if resp.Outcome != tt.outcome || resp.Usage.OutputTokens != tt.tokens {
			t.Errorf("Stream(max %d) = %+v with %d tokens, want %+v with %d",
				tt.max, resp.Outcome, resp.Usage.OutputTokens, tt.outcome, tt.tokens)
		}
	}
}

func TestStreamDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 50 * time.Millisecond
		var times []time.Time
		p := local.New(local.Options{Delay: delay})
		_, err := p.Stream(context.Background(), providers.Request{Context: fullContext()}, func(ev providers.Event) error {
			if ev.Kind == providers.EventTextDelta {
				times = append(times, time.Now())
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Stream = %v, want nil", err)
		}
		for i := 1; i < len(times); i++ {
			if d := times[i].Sub(times[i-1]); d != delay {
				t.Errorf("delta %d came %v after the one before, want %v", i, d, delay)
			}
		}
	})
}

func TestStreamCancel(t *testing.T) {
	const delay = time.Second
	tests := []struct {
		name    string
		timeout time.Duration // 0: cancel from emit after the second delta
		wantErr error
		tokens  int
		elapsed time.Duration
	}{
		{"cancel from emit", 0, context.Canceled, 2, delay},
		{"deadline between tokens", 2*delay + delay/2, context.DeadlineExceeded, 3, 2*delay + delay/2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tt.timeout > 0 {
					ctx, cancel = context.WithTimeout(ctx, tt.timeout)
					defer cancel()
				}
				var r recorder
				emit := func(ev providers.Event) error {
					r.emit(ev)
					if tt.timeout == 0 && r.deltas() == 2 {
						cancel()
					}
					return nil
				}
				start := time.Now()
				resp, err := local.New(local.Options{Delay: delay}).Stream(ctx, providers.Request{Context: fullContext()}, emit)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Stream = %v, want %v", err, tt.wantErr)
				}
				if got := time.Since(start); got != tt.elapsed {
					t.Errorf("Stream returned after %v, want %v", got, tt.elapsed)
				}
				want := strings.Join(local.Tokens(local.Reply(fullContext()))[:tt.tokens], "")
				if got := responseText(t, resp); got != want || r.text() != want {
					t.Errorf("partial text = %q, deltas %q, want %q", got, r.text(), want)
				}
				if resp.Outcome.Kind != messages.OutcomeCancelled || resp.Usage.OutputTokens != tt.tokens {
					t.Errorf("partial response = %+v with %d tokens, want cancelled with %d",
						resp.Outcome, resp.Usage.OutputTokens, tt.tokens)
				}
			})
		})
	}
}

func TestStreamCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var r recorder
	resp, err := local.New(local.Options{}).Stream(ctx, providers.Request{Context: fullContext()}, r.emit)
	if !errors.Is(err, context.Canceled) || len(r.events) != 0 || len(resp.Items) != 0 {
		t.Errorf("Stream(done ctx) = %d items, %v with %d events, want 0 items, %v, 0 events",
			len(resp.Items), err, len(r.events), context.Canceled)
	}
}

func TestStreamEmitError(t *testing.T) {
	errBoom := errors.New("boom")
	toks := local.Tokens(local.Reply(fullContext()))
	tests := []struct {
		failAt int // index of the event emit fails on; 0 is the start event
	}{{0}, {1}, {3}, {len(toks)}}
	for _, tt := range tests {
		calls := 0
		emit := func(providers.Event) error {
			calls++
			if calls-1 == tt.failAt {
				return errBoom
			}
			return nil
		}
		resp, err := local.New(local.Options{}).Stream(context.Background(), providers.Request{Context: fullContext()}, emit)
		if !errors.Is(err, errBoom) {
			t.Fatalf("Stream(fail at %d) = %v, want %v", tt.failAt, err, errBoom)
		}
		if calls != tt.failAt+1 {
			t.Errorf("Stream(fail at %d) called emit %d times, want %d", tt.failAt, calls, tt.failAt+1)
		}
		sent := max(tt.failAt-1, 0) // tokens emit accepted
		want := strings.Join(toks[:sent], "")
		if got := responseText(t, resp); got != want || resp.Usage.OutputTokens != sent {
			t.Errorf("Stream(fail at %d) partial = %q (%d tokens), want %q (%d)", tt.failAt, got, resp.Usage.OutputTokens, want, sent)
		}
		if resp.Outcome.Kind != messages.OutcomeFailed {
			t.Errorf("Stream(fail at %d) outcome = %+v, want failed", tt.failAt, resp.Outcome)
		}
	}
}

func TestStreamConcurrent(t *testing.T) {
	p := local.New(local.Options{})
	req := providers.Request{Context: fullContext()}
	want := local.Reply(req.Context)
	done := make(chan string)
	for range 8 {
		go func() {
			var r recorder
			if _, err := p.Stream(context.Background(), req, r.emit); err != nil {
				done <- err.Error()
				return
			}
			done <- r.text()
		}()
	}
	for range 8 {
		if got := <-done; got != want {
			t.Errorf("concurrent Stream = %q, want %q", got, want)
		}
	}
}

// The local model takes stop sequences (its reply ends before the first)
// and the sampling settings, and refuses what it cannot write.
func TestLocalParams(t *testing.T) {
	t.Parallel()
	p := local.New(local.Options{})
	req := providers.Request{Model: "local", MaxOutputTokens: 100, Context: messages.AssembledContext{
		User: messages.NewMessage(messages.RoleUser, messages.Text{Text: "hello"})}}
	full, err := p.Stream(context.Background(), req, func(providers.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	text := full.Items[0].(messages.AssistantMessage).Blocks.RenderedText()
	stop := text[len(text)/2 : len(text)/2+3]
	req.Params = messages.GenParams{Stop: []string{stop}, Temperature: new(0.1)}
	cut, err := p.Stream(context.Background(), req, func(providers.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got := cut.Items[0].(messages.AssistantMessage).Blocks.RenderedText(); got != text[:strings.Index(text, stop)] {
		t.Errorf("reply with stop %q = %q, want %q", stop, got, text[:strings.Index(text, stop)])
	}
	if got := p.RefusedParams("local", req.Params); len(got) != 0 {
		t.Errorf("RefusedParams(stop, temperature) = %v", got)
	}
	var fields []string
	for _, r := range p.RefusedParams("local", messages.GenParams{ReasoningEffort: "low", Verbosity: "low",
		ResponseFormat: &messages.ResponseFormat{Type: messages.FormatJSONObject}}) {
		fields = append(fields, r.Field)
	}
	if strings.Join(fields, ",") != "response_format,reasoning_effort,verbosity" {
		t.Errorf("refused %v", fields)
	}
}
