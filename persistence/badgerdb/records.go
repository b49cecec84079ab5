package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"encoding/binary"
	"fmt"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

const recordVersion byte = 1

// encodeTurn lays a turn out as
//
//	version u8 | parent 16 | depth uv | type_tag uv | codec uv | hash 32 |
//	flags uv | created_ms uv | nskips u8 | skips 16·n
func encodeTurn(r persistence.NodeRecord) []byte {
	b := make([]byte, 0, 1+16+32+6*binary.MaxVarintLen64+1+16*len(r.Skips))
	b = append(b, recordVersion)
	b = append(b, r.Parent[:]...)
	b = binary.AppendUvarint(b, r.Depth)
	b = binary.AppendUvarint(b, r.TypeTag)
	b = binary.AppendUvarint(b, uint64(r.Codec))
	b = append(b, r.PayloadHash[:]...)
	b = binary.AppendUvarint(b, uint64(r.Flags))
	b = binary.AppendUvarint(b, uint64(r.CreatedAt.UnixMilli()))
	b = append(b, byte(len(r.Skips)))
	for _, s := range r.Skips {
		b = append(b, s[:]...)
	}
	return b
}

// decoder reads fields from a record and remembers the first failure.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fixed(dst []byte) {
	if d.err != nil {
		return
	}
	if len(d.b) < len(dst) {
		d.err = fmt.Errorf("%w: record truncated", persistence.ErrCorrupt)
		return
	}
	copy(dst, d.b)
	d.b = d.b[len(dst):]
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || (n > 1 && d.b[n-1] == 0) { // overflow, truncation or over-long form
		d.err = fmt.Errorf("%w: bad varint in record", persistence.ErrCorrupt)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) version() {
	var v [1]byte
	d.fixed(v[:])
	if d.err == nil && v[0] != recordVersion {
		d.err = fmt.Errorf("%w: record version %d", persistence.ErrCorrupt, v[0])
	}
}

func (d *decoder) u32() uint32 {
	v := d.uvarint()
	if v > 1<<32-1 && d.err == nil {
		d.err = fmt.Errorf("%w: field overflows 32 bits", persistence.ErrCorrupt)
	}
	return uint32(v)
}

func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes in record", persistence.ErrCorrupt, len(d.b))
	}
	return d.err
}

func decodeTurn(id messages.NodeID, b []byte) (persistence.NodeRecord, error) {
	d := decoder{b: b}
	var r persistence.NodeRecord
	r.ID = id
	d.version()
	d.fixed(r.Parent[:])
	r.Depth = d.uvarint()
	r.TypeTag = d.uvarint()
	r.Codec = d.u32()
	d.fixed(r.PayloadHash[:])
	r.Flags = d.u32()
	r.CreatedAt = time.UnixMilli(int64(d.uvarint()))
	var n [1]byte
	d.fixed(n[:])
	if d.err == nil {
		r.Skips = make([]messages.NodeID, n[0])
		for i := range r.Skips {
			d.fixed(r.Skips[i][:])
		}
	}
	if err := d.done(); err != nil {
		return persistence.NodeRecord{}, fmt.Errorf("turn %s: %w", id, err)
	}
	return r, nil
}

// encodeHead lays a head out as
//
//	version u8 | turn 16 | depth uv | base 16 | created_ms uv
func encodeHead(h persistence.Head) []byte {
	b := make([]byte, 0, 1+32+2*binary.MaxVarintLen64)
	b = append(b, recordVersion)
	b = append(b, h.Node[:]...)
	b = binary.AppendUvarint(b, h.Depth)
	b = append(b, h.Base[:]...)
	return binary.AppendUvarint(b, uint64(h.CreatedAt.UnixMilli()))
}

func decodeHead(id messages.BranchID, b []byte) (persistence.Head, error) {
	d := decoder{b: b}
	h := persistence.Head{Branch: id}
	d.version()
	d.fixed(h.Node[:])
	h.Depth = d.uvarint()
	d.fixed(h.Base[:])
	h.CreatedAt = time.UnixMilli(int64(d.uvarint()))
	if err := d.done(); err != nil {
		return persistence.Head{}, fmt.Errorf("head of branch %s: %w", id, err)
	}
	return h, nil
}

// encodeOverlay lays an overlay out as
//
//	version u8 | tombstone u8 | hash 32 | purged 32 | created_ms uv
func encodeOverlay(o persistence.Overlay) []byte {
	b := make([]byte, 0, 2+64+binary.MaxVarintLen64)
	b = append(b, recordVersion)
	if o.Tombstone {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = append(b, o.Hash[:]...)
	b = append(b, o.Purged[:]...)
	return binary.AppendUvarint(b, uint64(o.CreatedAt.UnixMilli()))
}

func decodeOverlay(turn messages.NodeID, seq uint64, b []byte) (persistence.Overlay, error) {
	d := decoder{b: b}
	o := persistence.Overlay{Node: turn, Seq: seq}
	d.version()
	var t [1]byte
	d.fixed(t[:])
	if t[0] > 1 && d.err == nil {
		d.err = fmt.Errorf("%w: overlay kind %d", persistence.ErrCorrupt, t[0])
	}
	o.Tombstone = t[0] == 1
	d.fixed(o.Hash[:])
	d.fixed(o.Purged[:])
	o.CreatedAt = time.UnixMilli(int64(d.uvarint()))
	if err := d.done(); err != nil {
		return persistence.Overlay{}, fmt.Errorf("overlay %d of turn %s: %w", seq, turn, err)
	}
	return o, nil
}

// timeMillis truncates t to the millisecond precision that records keep.
func timeMillis(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }

func binaryUvarint(n uint64) []byte { return binary.AppendUvarint(nil, n) }
