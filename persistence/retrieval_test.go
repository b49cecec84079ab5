package persistence

import (
	"reflect"
	"testing"
)

// A partition entry keeps its chunk's metadata after its terms; an
// entry laid out before metadata was kept (none after the terms) reads
// with none, and one written without metadata is laid out as then.
func TestDocMetaRoundTrip(t *testing.T) {
	t.Parallel()
	terms := map[string]float32{"deploy": 1, "friday": 0.5}
	for _, meta := range []DocMeta{
		{},
		{Time: 1_683_554_160_000, Role: "user", Speaker: "Caroline"},
		{Time: -1, Role: "tool"},
		{Role: "assistant"},
	} {
		b := EncodeDoc(terms, 1.5, meta)
		gotTerms, n, got, err := DecodeDoc(b)
		if err != nil || n != 1.5 || !reflect.DeepEqual(gotTerms, terms) || got != meta {
			t.Errorf("DecodeDoc(EncodeDoc(%+v)) = %v, %v, %+v, %v", meta, gotTerms, n, got, err)
		}
	}
	old := EncodeDoc(terms, 1.5, DocMeta{})
	if with := EncodeDoc(terms, 1.5, DocMeta{Role: "user"}); len(with) <= len(old) || string(with[:len(old)]) != string(old) {
		t.Errorf("metadata is not a trailer of the entry: %x, without %x", with, old)
	}
	good := EncodeDoc(terms, 1.5, DocMeta{Time: 5, Role: "user", Speaker: "Mel"})
	for name, b := range map[string][]byte{
		"unknown trailer":  append(append([]byte{}, old...), 2),
		"cut time":         append(append([]byte{}, old...), 1),
		"unknown role":     append(append([]byte{}, old...), 1, 0, 9, 0),
		"speaker too long": append(append([]byte{}, old...), 1, 0, 1, 5, 'a'),
		"bytes after":      append(append([]byte{}, good...), 'x'),
	} {
		if _, _, _, err := DecodeDoc(b); err == nil {
			t.Errorf("%s: DecodeDoc(%x) took it", name, b)
		}
	}
}
