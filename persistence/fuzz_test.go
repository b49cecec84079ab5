package persistence

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

func seedKeys() [][]byte {
	now := time.UnixMilli(1_700_000_000_000)
	t1 := messages.NewID[messages.TurnID](now)
	t2 := messages.NewID[messages.TurnID](now)
	b := messages.NewID[messages.BranchID](now)
	h := HashOf([]byte("seed"))
	return [][]byte{
		blobKey(h), refsKey(h), turnKey(t1), headKey(b), childKey(t1, t2),
		overlayKey(t1, 7), overlayOrderKey(7, t1), metaKey("overlay_seq"),
		{}, {'z'}, {tableTurn, 1, 2},
	}
}

// FuzzKeyCodec: any bytes either fail to decode with ErrCorrupt or decode
// to a key that encodes back to exactly those bytes.
func FuzzKeyCodec(f *testing.F) {
	for _, k := range seedKeys() {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := decodeKey(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeKey(%x) error %v is not ErrCorrupt", b, err)
			}
			return
		}
		if got := k.encode(); !bytes.Equal(got, b) {
			t.Fatalf("decodeKey(%x).encode() = %x", b, got)
		}
	})
}

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

// FuzzRecordDecode: turn, head and overlay records decode without panics
// and re-encode to the same bytes when they decode.
func FuzzRecordDecode(f *testing.F) {
	now := time.UnixMilli(1_700_000_000_000)
	id := messages.NewID[messages.TurnID](now)
	f.Add(encodeTurn(TurnRecord{Turn: Turn{Parent: id, Depth: 8, TypeTag: 3, PayloadHash: HashOf([]byte("x")), CreatedAt: now},
		Skips: []messages.TurnID{id, id, id}}))
	f.Add(encodeHead(Head{Turn: id, Depth: 9, Base: id, CreatedAt: now}))
	f.Add(encodeOverlay(Overlay{Hash: HashOf([]byte("y")), CreatedAt: now}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodeTurn(id, b); err == nil {
			if got := encodeTurn(r); !bytes.Equal(got, b) {
				t.Fatalf("turn record %x re-encodes as %x", b, got)
			}
		}
		if h, err := decodeHead(messages.BranchID(id), b); err == nil {
			if got := encodeHead(h); !bytes.Equal(got, b) {
				t.Fatalf("head record %x re-encodes as %x", b, got)
			}
		}
		if o, err := decodeOverlay(id, 1, b); err == nil {
			if got := encodeOverlay(o); !bytes.Equal(got, b) {
				t.Fatalf("overlay record %x re-encodes as %x", b, got)
			}
		}
	})
}
