package persistence

import "github.com/contextinfinity/ctxinf/messages"

// TurnRecord is a stored turn: the Turn fields (its id is in the key) plus
// its skip pointers, skips[k-1] being the ancestor at depth Depth - 2^k.
type TurnRecord struct {
	Turn
	Skips []messages.TurnID
}

// ApplyOverlay returns t as seen through o.
func ApplyOverlay(t Turn, o Overlay) Turn {
	t.OverlaySeq = o.Seq
	t.Flags &^= FlagPatched | FlagTombstoned
	if o.Tombstone {
		t.PayloadHash = Hash{}
		t.Flags |= FlagTombstoned
	} else {
		t.PayloadHash = o.Hash
		t.Flags |= FlagPatched
	}
	return t
}
