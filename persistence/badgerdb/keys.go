package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"encoding/binary"
	"fmt"

	"github.com/contextinfinity/ctxinf/messages"
)

// Badger keys are a one-byte table prefix followed by fixed-width
// big-endian fields, so a prefix scan returns rows in order.
const (
	tableBlob     byte = 'b' // b | hash(32)                  → blob record
	tableRefs     byte = 'n' // n | hash(32)                  → uvarint reference count
	tableTurn     byte = 't' // t | turn(16)                  → turn record
	tableChild    byte = 'c' // c | parent(16) | child(16)    → empty
	tableHead     byte = 'h' // h | branch(16)                → head record
	tableOverlay  byte = 'o' // o | turn(16) | seq(8)         → overlay record
	tableMeta     byte = 'm' // m | name                      → metadata
	tableOverlays byte = 'O' // O | seq(8) | turn(16)         → empty (global overlay order)
)

// key is a decoded key: its table and fields. Unused fields are zero.
type key struct {
	table byte
	hash  persistence.Hash
	a, b  [16]byte // turn, branch, parent/child ids
	seq   uint64
	name  string
}

var keyLen = map[byte]int{
	tableBlob: 1 + 32, tableRefs: 1 + 32, tableTurn: 1 + 16, tableChild: 1 + 32,
	tableHead: 1 + 16, tableOverlay: 1 + 16 + 8, tableOverlays: 1 + 8 + 16,
}

func blobKey(h persistence.Hash) []byte   { return append([]byte{tableBlob}, h[:]...) }
func refsKey(h persistence.Hash) []byte   { return append([]byte{tableRefs}, h[:]...) }
func turnKey(id messages.NodeID) []byte   { return append([]byte{tableTurn}, id[:]...) }
func headKey(id messages.BranchID) []byte { return append([]byte{tableHead}, id[:]...) }
func metaKey(name string) []byte          { return append([]byte{tableMeta}, name...) }

func childKey(parent, child messages.NodeID) []byte {
	k := make([]byte, 0, 33)
	k = append(k, tableChild)
	k = append(k, parent[:]...)
	return append(k, child[:]...)
}

func childPrefix(parent messages.NodeID) []byte { return append([]byte{tableChild}, parent[:]...) }

func overlayKey(turn messages.NodeID, seq uint64) []byte {
	k := make([]byte, 0, 25)
	k = append(k, tableOverlay)
	k = append(k, turn[:]...)
	return binary.BigEndian.AppendUint64(k, seq)
}

func overlayPrefix(turn messages.NodeID) []byte { return append([]byte{tableOverlay}, turn[:]...) }

func overlayOrderKey(seq uint64, turn messages.NodeID) []byte {
	k := make([]byte, 0, 25)
	k = append(k, tableOverlays)
	k = binary.BigEndian.AppendUint64(k, seq)
	return append(k, turn[:]...)
}

// encode returns the bytes of k.
func (k key) encode() []byte {
	switch k.table {
	case tableBlob, tableRefs:
		return append([]byte{k.table}, k.hash[:]...)
	case tableTurn, tableHead:
		return append([]byte{k.table}, k.a[:]...)
	case tableChild:
		return append(append([]byte{k.table}, k.a[:]...), k.b[:]...)
	case tableOverlay:
		return binary.BigEndian.AppendUint64(append([]byte{k.table}, k.a[:]...), k.seq)
	case tableOverlays:
		return append(binary.BigEndian.AppendUint64([]byte{k.table}, k.seq), k.a[:]...)
	case tableMeta:
		return append([]byte{k.table}, k.name...)
	}
	return nil
}

// decodeKey parses a key. It fails on an unknown table or a wrong length.
func decodeKey(b []byte) (key, error) {
	var k key
	if len(b) == 0 {
		return k, fmt.Errorf("%w: empty key", persistence.ErrCorrupt)
	}
	k.table = b[0]
	if k.table == tableMeta {
		k.name = string(b[1:])
		return k, nil
	}
	want, ok := keyLen[k.table]
	if !ok {
		return k, fmt.Errorf("%w: key table %q unknown", persistence.ErrCorrupt, k.table)
	}
	if len(b) != want {
		return k, fmt.Errorf("%w: key table %q is %d bytes, want %d", persistence.ErrCorrupt, k.table, len(b), want)
	}
	f := b[1:]
	switch k.table {
	case tableBlob, tableRefs:
		copy(k.hash[:], f)
	case tableTurn, tableHead:
		copy(k.a[:], f)
	case tableChild:
		copy(k.a[:], f[:16])
		copy(k.b[:], f[16:])
	case tableOverlay:
		copy(k.a[:], f[:16])
		k.seq = binary.BigEndian.Uint64(f[16:])
	case tableOverlays:
		k.seq = binary.BigEndian.Uint64(f[:8])
		copy(k.a[:], f[8:])
	}
	return k, nil
}
