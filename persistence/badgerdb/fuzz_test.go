package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

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
	h := persistence.HashOf([]byte("seed"))
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
			if !errors.Is(err, persistence.ErrCorrupt) {
				t.Fatalf("decodeKey(%x) error %v is not ErrCorrupt", b, err)
			}
			return
		}
		if got := k.encode(); !bytes.Equal(got, b) {
			t.Fatalf("decodeKey(%x).encode() = %x", b, got)
		}
	})
}

// FuzzRecordDecode: turn, head and overlay records decode without panics
// and re-encode to the same bytes when they decode.
func FuzzRecordDecode(f *testing.F) {
	now := time.UnixMilli(1_700_000_000_000)
	id := messages.NewID[messages.TurnID](now)
	f.Add(encodeTurn(persistence.NodeRecord{Node: persistence.Node{Parent: id, Depth: 8, TypeTag: 3, PayloadHash: persistence.HashOf([]byte("x")), CreatedAt: now},
		Skips: []messages.NodeID{id, id, id}}))
	f.Add(encodeHead(persistence.Head{Node: id, Depth: 9, Base: id, CreatedAt: now}))
	f.Add(encodeOverlay(persistence.Overlay{Hash: persistence.HashOf([]byte("y")), CreatedAt: now}))
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
