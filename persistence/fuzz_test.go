package persistence

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzBlobDecode: decoding arbitrary records never panics and never
// returns bytes without an error unless the record is intact; intact
// records of any payload round-trip.
func FuzzBlobDecode(f *testing.F) {
	f.Add([]byte("hello"), []byte{}, uint8(0))
	f.Add(bytes.Repeat([]byte("conversation text "), 200), []byte{}, uint8(0))
	f.Add(bytes.Repeat([]byte("s2 text "), 200), []byte{1, 2}, uint8(2))
	f.Add([]byte{0x89, 'P', 'N', 'G', 0, 1, 2, 3}, []byte{5}, uint8(1))
	f.Fuzz(func(t *testing.T, payload, flip []byte, codec uint8) {
		if len(payload) == 0 {
			return
		}
		c := []Compression{CompressZstd, CompressNone, CompressS2}[codec%3]
		h := HashOf(payload)
		rec := EncodeBlob(payload, c)
		got, err := DecodeBlob(h, rec, 1<<30)
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("round trip of %d bytes: %v", len(payload), err)
		}
		// Damage the record where flip says; the result is an error or,
		// if the damage cancelled out, the original payload.
		bad := append([]byte(nil), rec...)
		for i, x := range flip {
			bad[(i*7919+int(x))%len(bad)] ^= x | 1
		}
		got, err = DecodeBlob(h, bad, 1<<30)
		if err == nil && !bytes.Equal(got, payload) {
			t.Fatalf("damaged record decoded to %d wrong bytes without error", len(got))
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("damaged record error %v is not ErrCorrupt", err)
		}
		// Arbitrary bytes as a record: no panic, only ErrCorrupt.
		if _, err := DecodeBlob(h, payload, 1<<20); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeBlob(garbage) error %v is not ErrCorrupt", err)
		}
	})
}
