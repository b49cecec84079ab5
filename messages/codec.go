package messages

import (
	"bytes"
	"encoding/json"
	"encoding/json/jsontext"
	"fmt"
	"strings"
)

// This file holds the JSON plumbing shared by blocks, items and messages.
// Objects are read into maps of raw values and written by hand, so that raw
// provider JSON (json.RawMessage fields, unknown kinds) passes through byte
// for byte: encoding/json would compact it.

// scope names what is being coded, for errors: the sentinel they wrap and
// the kind ("tool_use"), empty for untagged values such as Message.
type scope struct {
	sentinel error
	kind     string
}

// errorf returns an error naming field key, such as
// `messages: invalid content block: tool_use: field "name" is required`.
func (s scope) errorf(key, format string, args ...any) error {
	where := fmt.Sprintf("field %q", key)
	if s.kind != "" {
		where = s.kind + ": " + where
	}
	return fmt.Errorf("%w: %s "+format, append([]any{s.sentinel, where}, args...)...)
}

// isObject reports whether raw is valid JSON holding an object.
func isObject(raw []byte) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(raw)
}

// reader reads the fields of one JSON object. The first error sticks.
type reader struct {
	scope
	fields map[string]json.RawMessage
	err    error
}

// readObject decodes data, which must hold a JSON object.
func readObject(s scope, data []byte) (*reader, error) {
	t := bytes.TrimLeft(data, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", s.sentinel)
	}
	r := &reader{scope: s}
	if err := json.Unmarshal(data, &r.fields); err != nil {
		return nil, fmt.Errorf("%w: %w", s.sentinel, err)
	}
	return r, nil
}

// decode decodes field key into v, leaving v alone when key is absent.
func (r *reader) decode(key string, v any) bool {
	raw, ok := r.fields[key]
	if !ok || r.err != nil {
		return false
	}
	if err := json.Unmarshal(raw, v); err != nil {
		r.err = r.errorf(key, "is invalid: %w", err)
		return false
	}
	return true
}

// str returns string field key; absent or null reads as "".
func (r *reader) str(key string) string {
	var s string
	r.decode(key, &s)
	return s
}

// required returns string field key, which must be present and non-empty.
func (r *reader) required(key string) string {
	s := r.str(key)
	if s == "" && r.err == nil {
		r.err = r.errorf(key, "is required")
	}
	return s
}

// optStr returns string field key, or nil when it is absent or null.
func (r *reader) optStr(key string) *string {
	var s *string
	r.decode(key, &s)
	return s
}

// boolean returns boolean field key; absent or null reads as false.
func (r *reader) boolean(key string) bool {
	var b bool
	r.decode(key, &b)
	return b
}

// raw returns field key verbatim, or nil when it is absent or null.
func (r *reader) raw(key string) json.RawMessage {
	v := r.fields[key]
	if string(v) == "null" {
		return nil
	}
	return v
}

// rawList returns the elements of array field key verbatim; an absent,
// null or empty array reads as nil.
func (r *reader) rawList(key string) []json.RawMessage {
	var vs []json.RawMessage
	if r.decode(key, &vs) && len(vs) == 0 {
		vs = nil
	}
	return vs
}

// blocks returns the content blocks in field key.
func (r *reader) blocks(key string) Blocks {
	var bs Blocks
	r.unmarshal(key, &bs)
	return bs
}

// unmarshal decodes field key, when present, with v's own decoder.
func (r *reader) unmarshal(key string, v json.Unmarshaler) {
	if raw, ok := r.fields[key]; ok && r.err == nil {
		if err := v.UnmarshalJSON(raw); err != nil {
			r.err = r.errorf(key, "is invalid: %w", err)
		}
	}
}

// writer writes one JSON object field by field. The first error sticks.
type writer struct {
	scope
	buf []byte
	err error
}

// newWriter starts an object; a non-empty kind is written as its "type".
func newWriter(s scope) *writer {
	w := &writer{scope: s, buf: []byte{'{'}}
	if s.kind != "" {
		w.str("type", s.kind)
	}
	return w
}

func (w *writer) key(k string) {
	if len(w.buf) > 1 {
		w.buf = append(w.buf, ',')
	}
	w.buf = append(w.buf, '"')
	w.buf = append(w.buf, k...) // keys are constants needing no escapes
	w.buf = append(w.buf, '"', ':')
}

// str writes string field k. Unlike json.Marshal it leaves <, > and &
// unescaped: transcripts are full of code.
func (w *writer) str(k, v string) {
	w.key(k)
	w.buf = appendString(w.buf, v)
}

// appendString appends v as a JSON string, as encoding/json's Encoder
// with SetEscapeHTML(false) writes it: jsontext.AppendQuote's minimal
// escaping is the same except for U+2028 and U+2029 (which
// encoding/json escapes) and invalid UTF-8 (which both replace, the
// quoter with an error), so those few strings go through the Encoder.
// Stored messages are content-addressed by these bytes: they must not
// change.
func appendString(dst []byte, v string) []byte {
	// U+2028 and U+2029 are E2 80 A8 and E2 80 A9 in UTF-8.
	if strings.IndexByte(v, 0xE2) < 0 || !strings.Contains(v, "\u2028") && !strings.Contains(v, "\u2029") {
		if out, err := jsontext.AppendQuote(dst, v); err == nil {
			return out
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // never fails for a string
	return append(dst, bytes.TrimSuffix(b.Bytes(), []byte{'\n'})...)
}

// required writes string field k, which must not be empty.
func (w *writer) required(k, v string) {
	if v == "" && w.err == nil {
		w.err = w.errorf(k, "is required")
	}
	w.str(k, v)
}

// optStr writes string field k unless v is nil.
func (w *writer) optStr(k string, v *string) {
	if v != nil {
		w.str(k, *v)
	}
}

// boolean writes field k only when v is true.
func (w *writer) boolean(k string, v bool) {
	if v {
		w.key(k)
		w.buf = append(w.buf, "true"...)
	}
}

// raw writes v verbatim as field k, unless v is nil.
func (w *writer) raw(k string, v json.RawMessage) {
	if v == nil {
		return
	}
	if !json.Valid(v) {
		if w.err == nil {
			w.err = w.errorf(k, "is not valid JSON")
		}
		return
	}
	w.key(k)
	w.buf = append(w.buf, v...)
}

// rawList writes vs as an array of verbatim values, unless it is empty.
func (w *writer) rawList(k string, vs []json.RawMessage) {
	if len(vs) == 0 {
		return
	}
	w.key(k)
	w.buf = append(w.buf, '[')
	for i, v := range vs {
		if !json.Valid(v) {
			if w.err == nil {
				w.err = w.errorf(k, "is invalid: element %d is not valid JSON", i)
			}
			return
		}
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		w.buf = append(w.buf, v...)
	}
	w.buf = append(w.buf, ']')
}

// blocks writes bs as field k; it is always written, as [] when empty.
func (w *writer) blocks(k string, bs Blocks) {
	b, err := bs.MarshalJSON()
	if err != nil {
		if w.err == nil {
			w.err = w.errorf(k, "is invalid: %w", err)
		}
		return
	}
	w.key(k)
	w.buf = append(w.buf, b...)
}

// finish closes the object and returns it, or the first error.
func (w *writer) finish() ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	return append(w.buf, '}'), nil
}
