package fakeapi_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
)

// anthropicEvent is the part of an event's data the tests look at.
type anthropicEvent struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	ContentBlock struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"content_block"`
}

// anthropicDecode checks that every event's data is JSON whose type is
// the event name, and returns them decoded.
func anthropicDecode(t *testing.T, events []fakeapi.Event) []anthropicEvent {
	t.Helper()
	var out []anthropicEvent
	for i, ev := range events {
		var e anthropicEvent
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			t.Fatalf("event %d (%s) data %q: %v", i, ev.Name, ev.Data, err)
		}
		if e.Type != ev.Name {
			t.Errorf("event %d named %q has type %q", i, ev.Name, e.Type)
		}
		out = append(out, e)
	}
	return out
}

func anthropicNames(events []fakeapi.Event) string {
	var ns []string
	for _, ev := range events {
		ns = append(ns, ev.Name)
	}
	return strings.Join(ns, ",")
}

func TestAnthropicText(t *testing.T) {
	r := fakeapi.AnthropicText([]string{"Hel", "lo"}, "max_tokens")
	want := "message_start,ping,content_block_start,content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop"
	if got := anthropicNames(r.Events); got != want {
		t.Fatalf("AnthropicText events %s, want %s", got, want)
	}
	evs := anthropicDecode(t, r.Events)
	if evs[3].Delta.Text+evs[4].Delta.Text != "Hello" || evs[6].Delta.StopReason != "max_tokens" {
		t.Errorf("AnthropicText events %+v", evs)
	}
	if r.Cut || r.Status != 0 {
		t.Errorf("AnthropicText reply %+v, want a whole stream", r)
	}
	if n := strings.Count(anthropicNames(fakeapi.AnthropicTextN(50, "x").Events), "content_block_delta"); n != 50 {
		t.Errorf("AnthropicTextN(50) has %d deltas, want 50", n)
	}
}

func TestAnthropicToolUse(t *testing.T) {
	input := `{"city":"Paris","note":"é"}`
	r := fakeapi.AnthropicToolUse("Let me check.", []fakeapi.AnthropicCall{
		{ID: "toolu_a", Name: "get_weather", Input: input},
		{Name: "get_time", Input: ""},
	}, 3)
	evs := anthropicDecode(t, r.Events)
	args := map[int]string{}
	deltas := map[int]int{}
	var ids []string
	for _, e := range evs {
		switch {
		case e.Type == "content_block_start" && e.ContentBlock.Type == "tool_use":
			ids = append(ids, e.ContentBlock.ID)
		case e.Delta.Type == "input_json_delta":
			args[e.Index] += e.Delta.PartialJSON
			deltas[e.Index]++
		}
	}
	if args[1] != input || deltas[1] != 3 || args[2] != "" || deltas[2] != 1 {
		t.Errorf("tool inputs %v in %v deltas", args, deltas)
	}
	if strings.Join(ids, ",") != "toolu_a,toolu_fake_2" {
		t.Errorf("tool ids %v", ids)
	}
	if last := evs[len(evs)-2]; last.Delta.StopReason != "tool_use" {
		t.Errorf("stop reason %q, want tool_use", last.Delta.StopReason)
	}
}

func TestAnthropicStreamExtras(t *testing.T) {
	r := fakeapi.NewAnthropicStream().
		Thinking("sig", "Let me ", "think.").
		Block(`{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}`, `{"type":"input_json_delta","partial_json":"{}"}`).
		Event("content_block_shimmer", `{"type":"content_block_shimmer","index":9}`).
		Error("overloaded_error", "Overloaded")
	evs := anthropicDecode(t, r.Events)
	if last := r.Events[len(r.Events)-1]; last.Name != "error" || !strings.Contains(last.Data, `"overloaded_error"`) {
		t.Errorf("last event %+v, want an overloaded error", last)
	}
	if evs[2].ContentBlock.Type != "thinking" || evs[7].ContentBlock.Type != "server_tool_use" || evs[7].Index != 1 {
		t.Errorf("events %+v", evs)
	}
}

func TestAnthropicUsage(t *testing.T) {
	type usage struct {
		Usage map[string]int `json:"usage"`
	}
	decode := func(data string) (start, delta usage) {
		var ev struct {
			Message usage          `json:"message"`
			Usage   map[string]int `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		return ev.Message, usage{ev.Usage}
	}
	r := fakeapi.AnthropicText([]string{"a", "b"}, "end_turn")
	anthropicDecode(t, r.Events)
	start, _ := decode(r.Events[0].Data)
	_, delta := decode(r.Events[len(r.Events)-2].Data)
	if start.Usage["input_tokens"] != fakeapi.AnthropicInputTokens || delta.Usage["output_tokens"] != 2 {
		t.Errorf("default usage: start %v, delta %v", start.Usage, delta.Usage)
	}

	r = fakeapi.NewAnthropicStream().Text("a", "b").Usage(1000, 77).CacheUsage(300, 4000).Stop("end_turn")
	if got := anthropicNames(r.Events); got != "message_start,ping,content_block_start,content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop" {
		t.Fatalf("events %s", got)
	}
	anthropicDecode(t, r.Events)
	start, _ = decode(r.Events[0].Data)
	_, delta = decode(r.Events[len(r.Events)-2].Data)
	want := map[string]int{"input_tokens": 1000, "output_tokens": 1, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 4000}
	if !reflect.DeepEqual(start.Usage, want) || delta.Usage["output_tokens"] != 77 {
		t.Errorf("usage: start %v, delta %v", start.Usage, delta.Usage)
	}
}

func TestAnthropicError(t *testing.T) {
	r := fakeapi.AnthropicError(429, "rate_limit_error", "Number of requests has exceeded your rate limit",
		http.Header{"Retry-After": {"7"}})
	var body struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal([]byte(r.Body), &body); err != nil {
		t.Fatalf("error body %q: %v", r.Body, err)
	}
	if r.Status != 429 || body.Type != "error" || body.Error.Type != "rate_limit_error" || r.Header.Get("Retry-After") != "7" {
		t.Errorf("AnthropicError reply %+v, body %+v", r, body)
	}
	if fakeapi.AnthropicError(500, "api_error", "x", nil).Header != nil {
		t.Errorf("AnthropicError with no header has headers")
	}
}

// A cut reply sends its events, then drops the connection without the
// end of the chunked body.
func TestAnthropicCut(t *testing.T) {
	s := fakeapi.New(fakeapi.NewAnthropicStream().Text("Partial").Cut())
	defer s.Close()
	resp, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("reading a cut body: err %v, want io.ErrUnexpectedEOF", err)
	}
	if body := strings.Join(lines, "\n"); !strings.Contains(body, `"text":"Partial"`) || strings.Contains(body, "message_stop") {
		t.Errorf("cut body:\n%s", body)
	}
}
