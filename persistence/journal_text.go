package persistence

import "encoding/json"

// JournalText reconstructs the text a journal's events displayed, for
// showing recovered partial output after a crash (SRD §13.4): the entries'
// Text, as AppendText recorded it. A journal written without it is read
// by the common shapes of streamed text deltas: a string "delta" (local,
// OpenAI Responses' output_text.delta), "delta":{"text":…} (Anthropic's
// content_block_delta) and "text"; other events add nothing.
func JournalText(entries []JournalEntry) string {
	var out []byte
	for _, e := range entries {
		out = append(out, e.Text...)
	}
	if len(out) > 0 {
		return string(out)
	}
	for _, e := range entries {
		var p struct {
			Delta json.RawMessage `json:"delta"`
			Text  string          `json:"text"`
		}
		if json.Unmarshal(e.Payload, &p) != nil {
			continue
		}
		var s string
		var obj struct {
			Text string `json:"text"`
		}
		switch {
		case json.Unmarshal(p.Delta, &s) == nil:
			out = append(out, s...)
		case json.Unmarshal(p.Delta, &obj) == nil && obj.Text != "":
			out = append(out, obj.Text...)
		case p.Delta == nil && p.Text != "":
			out = append(out, p.Text...)
		}
	}
	return string(out)
}
