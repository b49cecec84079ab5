package persistence

import "github.com/contextinfinity/ctxinf/messages"

// NodeRecord is a stored turn: the Turn fields (its id is in the key) plus
// its skip pointers, skips[k-1] being the ancestor at depth Depth - 2^k.
type NodeRecord struct {
	Node
	Skips []messages.NodeID
}

// ApplyOverlay returns t as seen through o.
func ApplyOverlay(t Node, o Overlay) Node {
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
