package persistence

import "testing"

func TestJournalText(t *testing.T) {
	entries := []JournalEntry{
		{EventType: "local.start", Payload: []byte(`{"model":"local"}`)},
		{EventType: "local.delta", Payload: []byte(`{"delta":"Hello "}`)},
		{EventType: "content_block_delta", Payload: []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"wor"}}`)},
		{EventType: "response.output_text.delta", Payload: []byte(`{"type":"response.output_text.delta","delta":"ld"}`)},
		{EventType: "ping", Payload: []byte(`null`)},
		{EventType: "weird", Payload: []byte(`{"delta":{"partial_json":"{}"}}`)},
	}
	if got := JournalText(entries); got != "Hello world" {
		t.Fatalf("JournalText = %q, want %q", got, "Hello world")
	}
}
