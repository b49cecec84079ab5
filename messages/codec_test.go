package messages

import (
	"bytes"
	"encoding/json"
	"testing"
)

// encoderString is a string as encoding/json's Encoder writes it with
// SetEscapeHTML(false): what appendString must keep writing, since
// stored messages are content-addressed by their bytes.
func encoderString(v string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}

var stringCases = []string{"", "plain", "<a href=\"x\">&amp;</a>", "tab\tnew\nline\rcr", "\x00\x01\x1f\x7f",
	"\b\f", "back\\slash", "line\u2028sep\u2029par", "bad \xff utf-8 \xc3", "emoji 😀 and ünïcödé", "\ufeffbom",
	"\u00a0nbsp", "'single' \"double\"", "\ud7ff\ue000\uffff"}

func TestAppendStringMatchesEncoder(t *testing.T) {
	for _, s := range stringCases {
		if got, want := appendString([]byte("x"), s), append([]byte("x"), encoderString(s)...); !bytes.Equal(got, want) {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range stringCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := appendString(nil, s), encoderString(s); !bytes.Equal(got, want) {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}
