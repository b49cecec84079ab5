package frame

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Payload layouts. Every integer is little-endian; every id is a 16-byte
// ULID (messages.BranchID, messages.NodeID), zero meaning "none"; a hash
// is 32 bytes of BLAKE3-256. Decoders are strict: a payload must have
// exactly the size its fields say, with no trailing bytes.
const (
	IDSize   = 16
	HashSize = 32

	// TurnSize is the encoded size of one turn: id, parent, depth u64,
	// type_tag u64, codec u32, flags u32, payload_hash, created_at_ms i64,
	// overlay_seq u64.
	TurnSize = 2*IDSize + 8 + 8 + 4 + 4 + HashSize + 8 + 8
	// AppendOverhead is the size of APPEND_TURN's fields before the
	// turn's payload bytes.
	AppendOverhead = appendFixedSize
	// HeadSize is the encoded size of a head: branch, turn, depth u64,
	// base, created_at_ms i64.
	HeadSize = 3*IDSize + 8 + 8

	pageFixedSize   = IDSize + 4 // next, count
	rangeFixedSize  = 8 + 4 + 4  // head_depth, flags, count
	appendFixedSize = 2*IDSize + 8 + 4 + 4 + 4 + 4
	helloFixedSize  = 2 + 2 + 4 + 2
	helloReplyFixed = 2 + 2 + 4 + 4 + 4 + 2
	errorFixedSize  = 2 + 2 + IDSize
)

// APPEND_TURN options (AppendRequest's opts field).
const (
	// AppendExpectParent makes the append conditional on the head being
	// ExpectParent (persistence.AppendRequest.ExpectParent).
	AppendExpectParent uint32 = 1 << 0
)

// RangePage flags.
const (
	// RangeEmpty is set when the branch has no turns.
	RangeEmpty uint32 = 1 << 0
)

// Request is a decoded request payload.
type Request interface {
	// Type is the request's msg_type.
	Type() MsgType
	// AppendPayload appends the encoded payload to b.
	AppendPayload(b []byte) []byte
}

// Hello opens a conversation: the version the client speaks, the largest
// frame it accepts (0: DefaultMaxFrame), a name for logs and, from
// TokenVersion on, the token that authenticates the connection.
//
//	version u16 | reserved u16 | max_frame u32 | name_len u16 | name                              (version 1)
//	version u16 | reserved u16 | max_frame u32 | name_len u16 | name | token_len u16 | token      (version >= 2)
type Hello struct {
	Version  uint16
	MaxFrame uint32
	Name     string
	// Token is carried when Version >= TokenVersion (ignored, not
	// encoded, below it); at most MaxTokenLen bytes.
	Token string
}

// HelloReply is the server's answer to HELLO: its version, the largest
// frame it accepts, the most turns one page answer carries, the store's
// payload limit, and its name.
//
//	version u16 | reserved u16 | max_frame u32 | max_page u32 | max_payload u32 | name_len u16 | name
type HelloReply struct {
	Version    uint16
	MaxFrame   uint32
	MaxPage    uint32
	MaxPayload uint32
	Name       string
}

// CreateRequest is CTX_CREATE: a new branch, empty (At zero) or based at
// an existing turn. Branch zero lets the server choose the id.
//
//	branch [16] | at [16]
type CreateRequest struct {
	Branch messages.BranchID
	At     messages.NodeID
}

// ForkRequest is CTX_FORK: a new branch whose head is an existing turn,
// named either directly (At) or as another branch's current head
// (Source); exactly one of them is set. No history is copied.
//
//	branch [16] | source [16] | at [16]
type ForkRequest struct {
	Branch messages.BranchID
	Source messages.BranchID
	At     messages.NodeID
}

// HeadRequest is GET_HEAD.
//
//	branch [16]
type HeadRequest struct {
	Branch messages.BranchID
}

// AppendRequest is APPEND_TURN: one turn at the branch head.
//
//	branch [16] | expect_parent [16] | type_tag u64 | codec u32 | flags u32 |
//	opts u32 | payload_len u32 | payload [payload_len]
//
// expect_parent counts only when opts has AppendExpectParent; flags are the
// turn's caller flags (persistence.CallerFlagsMask).
type AppendRequest struct {
	Branch       messages.BranchID
	ExpectParent *messages.NodeID
	TypeTag      uint64
	Codec        uint32
	Flags        uint32
	Payload      []byte
}

// LastRequest is GET_LAST: the last Limit turns of a branch.
//
//	branch [16] | limit u32
type LastRequest struct {
	Branch messages.BranchID
	Limit  uint32
}

// BeforeRequest is GET_BEFORE: up to Limit turns strictly older than
// Before on its ancestry (cursor paging).
//
//	before [16] | limit u32
type BeforeRequest struct {
	Before messages.NodeID
	Limit  uint32
}

// RangeRequest is GET_RANGE_BY_DEPTH: the branch's turns at depths
// [Start, Start+Limit).
//
//	branch [16] | start u64 | limit u32
type RangeRequest struct {
	Branch messages.BranchID
	Start  uint64
	Limit  uint32
}

// BlobRequest is GET_BLOB: a payload by hash.
//
//	hash [32]
type BlobRequest struct {
	Hash persistence.Hash
}

func (Hello) Type() MsgType         { return MsgHello }
func (CreateRequest) Type() MsgType { return MsgCtxCreate }
func (ForkRequest) Type() MsgType   { return MsgCtxFork }
func (HeadRequest) Type() MsgType   { return MsgGetHead }
func (AppendRequest) Type() MsgType { return MsgAppendTurn }
func (LastRequest) Type() MsgType   { return MsgGetLast }
func (BeforeRequest) Type() MsgType { return MsgGetBefore }
func (RangeRequest) Type() MsgType  { return MsgGetRangeByDepth }
func (BlobRequest) Type() MsgType   { return MsgGetBlob }

func (m Hello) AppendPayload(b []byte) []byte {
	b = le.AppendUint16(b, m.Version)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint32(b, m.MaxFrame)
	b = appendName(b, m.Name)
	if m.Version < TokenVersion {
		return b
	}
	// Not cut to MaxTokenLen, so that a server refuses a token too long
	// rather than check a prefix of it; the client checks the length.
	tok := m.Token[:min(len(m.Token), 0xFFFF)]
	b = le.AppendUint16(b, uint16(len(tok)))
	return append(b, tok...)
}

func (m CreateRequest) AppendPayload(b []byte) []byte {
	return append(append(b, m.Branch[:]...), m.At[:]...)
}

func (m ForkRequest) AppendPayload(b []byte) []byte {
	return append(append(append(b, m.Branch[:]...), m.Source[:]...), m.At[:]...)
}

func (m HeadRequest) AppendPayload(b []byte) []byte { return append(b, m.Branch[:]...) }

func (m AppendRequest) AppendPayload(b []byte) []byte {
	return append(m.appendFixed(b), m.Payload...)
}

// appendFixed appends the payload up to, not including, the turn's bytes.
func (m AppendRequest) appendFixed(b []byte) []byte {
	var expect messages.NodeID
	var opts uint32
	if m.ExpectParent != nil {
		expect, opts = *m.ExpectParent, AppendExpectParent
	}
	b = append(append(b, m.Branch[:]...), expect[:]...)
	b = le.AppendUint64(b, m.TypeTag)
	b = le.AppendUint32(b, m.Codec)
	b = le.AppendUint32(b, m.Flags)
	b = le.AppendUint32(b, opts)
	return le.AppendUint32(b, uint32(len(m.Payload)))
}

func (m LastRequest) AppendPayload(b []byte) []byte {
	return le.AppendUint32(append(b, m.Branch[:]...), m.Limit)
}

func (m BeforeRequest) AppendPayload(b []byte) []byte {
	return le.AppendUint32(append(b, m.Before[:]...), m.Limit)
}

func (m RangeRequest) AppendPayload(b []byte) []byte {
	b = le.AppendUint64(append(b, m.Branch[:]...), m.Start)
	return le.AppendUint32(b, m.Limit)
}

func (m BlobRequest) AppendPayload(b []byte) []byte { return append(b, m.Hash[:]...) }

// DecodeRequest decodes the payload of a request of type t. The returned
// AppendRequest's Payload aliases p.
func DecodeRequest(t MsgType, p []byte) (Request, error) {
	d := decoder{b: p}
	var r Request
	switch t {
	case MsgHello:
		m := Hello{Version: d.u16()}
		d.reserved16()
		m.MaxFrame = d.u32()
		m.Name = d.name()
		if m.Version >= TokenVersion {
			m.Token = d.token()
		}
		r = m
	case MsgCtxCreate:
		r = CreateRequest{Branch: d.id(), At: d.id()}
	case MsgCtxFork:
		r = ForkRequest{Branch: d.id(), Source: d.id(), At: d.id()}
	case MsgGetHead:
		r = HeadRequest{Branch: d.id()}
	case MsgAppendTurn:
		m := AppendRequest{Branch: d.id()}
		expect := messages.NodeID(d.id())
		m.TypeTag, m.Codec, m.Flags = d.u64(), d.u32(), d.u32()
		opts := d.u32()
		if opts&^AppendExpectParent != 0 {
			d.fail("APPEND_TURN opts %#x: only bit 0 (expect_parent) is defined", opts)
		}
		if opts&AppendExpectParent != 0 {
			m.ExpectParent = &expect
		} else if !expect.IsZero() {
			d.fail("APPEND_TURN expect_parent is set without the expect_parent option")
		}
		m.Payload = d.bytes(d.u32())
		r = m
	case MsgGetLast:
		r = LastRequest{Branch: d.id(), Limit: d.u32()}
	case MsgGetBefore:
		r = BeforeRequest{Before: d.id(), Limit: d.u32()}
	case MsgGetRangeByDepth:
		r = RangeRequest{Branch: d.id(), Start: d.u64(), Limit: d.u32()}
	case MsgGetBlob:
		r = BlobRequest{Hash: d.hash()}
	default:
		return nil, fmt.Errorf("%w %#04x", ErrUnknownType, uint16(t))
	}
	if err := d.finish(t); err != nil {
		return nil, err
	}
	return r, nil
}

// --- responses ---

// AppendPayload appends the HELLO reply payload to b.
func (m HelloReply) AppendPayload(b []byte) []byte {
	b = le.AppendUint16(b, m.Version)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint32(b, m.MaxFrame)
	b = le.AppendUint32(b, m.MaxPage)
	b = le.AppendUint32(b, m.MaxPayload)
	return appendName(b, m.Name)
}

// DecodeHelloReply decodes a HELLO reply payload.
func DecodeHelloReply(p []byte) (HelloReply, error) {
	d := decoder{b: p}
	m := HelloReply{Version: d.u16()}
	d.reserved16()
	m.MaxFrame, m.MaxPage, m.MaxPayload = d.u32(), d.u32(), d.u32()
	m.Name = d.name()
	return m, d.finish(MsgHello.Response())
}

// AppendHead appends the encoding of h (CTX_CREATE, CTX_FORK and GET_HEAD
// replies) to b.
func AppendHead(b []byte, h persistence.Head) []byte {
	b = append(append(b, h.Branch[:]...), h.Node[:]...)
	b = le.AppendUint64(b, h.Depth)
	b = append(b, h.Base[:]...)
	return le.AppendUint64(b, uint64(h.CreatedAt.UnixMilli()))
}

// DecodeHead decodes a CTX_CREATE, CTX_FORK or GET_HEAD reply.
func DecodeHead(p []byte) (persistence.Head, error) {
	d := decoder{b: p}
	h := d.head()
	return h, d.finish(MsgGetHead.Response())
}

// AppendNode appends the TurnSize-byte encoding of t (the APPEND_TURN
// reply, and each turn of a page) to b.
func AppendNode(b []byte, t persistence.Node) []byte {
	b = append(append(b, t.ID[:]...), t.Parent[:]...)
	b = le.AppendUint64(b, t.Depth)
	b = le.AppendUint64(b, t.TypeTag)
	b = le.AppendUint32(b, t.Codec)
	b = le.AppendUint32(b, t.Flags)
	b = append(b, t.PayloadHash[:]...)
	b = le.AppendUint64(b, uint64(t.CreatedAt.UnixMilli()))
	return le.AppendUint64(b, t.OverlaySeq)
}

// DecodeNode decodes an APPEND_TURN reply.
func DecodeNode(p []byte) (persistence.Node, error) {
	d := decoder{b: p}
	t := d.turn()
	return t, d.finish(MsgAppendTurn.Response())
}

// AppendPage appends a GET_LAST or GET_BEFORE reply to b:
//
//	next [16] | count u32 | turns [count × TurnSize]
func AppendPage(b []byte, p persistence.Page) []byte {
	b = append(b, p.Next[:]...)
	b = le.AppendUint32(b, uint32(len(p.Nodes)))
	for _, t := range p.Nodes {
		b = AppendNode(b, t)
	}
	return b
}

// DecodePage decodes a GET_LAST or GET_BEFORE reply.
func DecodePage(p []byte) (persistence.Page, error) {
	d := decoder{b: p}
	pg := persistence.Page{Next: d.id()}
	pg.Nodes = d.turns()
	return pg, d.finish(MsgGetLast.Response())
}

// AppendRangePage appends a GET_RANGE_BY_DEPTH reply to b:
//
//	head_depth u64 | flags u32 (RangeEmpty) | count u32 | turns [count × TurnSize]
func AppendRangePage(b []byte, p persistence.RangePage) []byte {
	b = le.AppendUint64(b, p.HeadDepth)
	var flags uint32
	if p.Empty {
		flags |= RangeEmpty
	}
	b = le.AppendUint32(b, flags)
	b = le.AppendUint32(b, uint32(len(p.Nodes)))
	for _, t := range p.Nodes {
		b = AppendNode(b, t)
	}
	return b
}

// DecodeRangePage decodes a GET_RANGE_BY_DEPTH reply.
func DecodeRangePage(p []byte) (persistence.RangePage, error) {
	d := decoder{b: p}
	rp := persistence.RangePage{HeadDepth: d.u64()}
	flags := d.u32()
	if flags&^RangeEmpty != 0 {
		d.fail("GET_RANGE_BY_DEPTH reply flags %#x: only bit 0 (empty) is defined", flags)
	}
	rp.Empty = flags&RangeEmpty != 0
	rp.Nodes = d.turns()
	return rp, d.finish(MsgGetRangeByDepth.Response())
}

// AppendError appends an ERROR payload to b:
//
//	code u16 | msg_len u16 | head [16] | message [msg_len]
//
// head is the actual head for CodeHeadMismatch, zero otherwise; the
// message is UTF-8, cut at MaxErrorMessage bytes.
func AppendError(b []byte, e *Error) []byte {
	msg := e.Message
	if len(msg) > MaxErrorMessage {
		msg = msg[:MaxErrorMessage]
	}
	b = le.AppendUint16(b, uint16(e.Code))
	b = le.AppendUint16(b, uint16(len(msg)))
	b = append(b, e.Head[:]...)
	return append(b, msg...)
}

// DecodeError decodes an ERROR payload.
func DecodeError(p []byte) (*Error, error) {
	d := decoder{b: p}
	e := &Error{Code: Code(d.u16())}
	n := d.u16()
	e.Head = d.id()
	if n > MaxErrorMessage {
		d.fail("ERROR message is %d bytes, over the limit of %d", n, MaxErrorMessage)
	}
	e.Message = string(d.bytes(uint32(n)))
	if err := d.finish(MsgError); err != nil {
		return nil, err
	}
	return e, nil
}

// AppendFrame appends a whole frame to b: the header, then the payload
// that payload appends, with len filled in.
func AppendFrame(b []byte, t MsgType, reqID uint64, payload func([]byte) []byte) []byte {
	start := len(b)
	b = AppendHeader(b, Header{Type: t, ReqID: reqID})
	if payload != nil {
		b = payload(b)
	}
	le.PutUint32(b[start:], uint32(len(b)-start-HeaderSize))
	return b
}

// EncodeRequest appends the frame of request r with id reqID to b. The
// frame is frame followed by tail: an APPEND_TURN's turn payload is
// returned as tail rather than copied. len counts both.
func EncodeRequest(b []byte, reqID uint64, r Request) (frame, tail []byte) {
	if m, ok := r.(AppendRequest); ok {
		b = AppendHeader(b, Header{Len: uint32(appendFixedSize + len(m.Payload)), Type: MsgAppendTurn, ReqID: reqID})
		return m.appendFixed(b), m.Payload
	}
	return AppendFrame(b, r.Type(), reqID, r.AppendPayload), nil
}

// --- decoding helpers ---

var le = binary.LittleEndian

func appendName(b []byte, name string) []byte {
	if len(name) > MaxNameLen {
		name = name[:MaxNameLen]
	}
	b = le.AppendUint16(b, uint16(len(name)))
	return append(b, name...)
}

// decoder reads fixed-width fields; the first error sticks and later
// reads return zeros.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b) < n {
		d.fail("payload ends %d bytes short", n-len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u16() uint16 {
	if v := d.take(2); v != nil {
		return le.Uint16(v)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if v := d.take(4); v != nil {
		return le.Uint32(v)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if v := d.take(8); v != nil {
		return le.Uint64(v)
	}
	return 0
}

func (d *decoder) reserved16() {
	if v := d.u16(); v != 0 {
		d.fail("reserved field is %#04x, want 0", v)
	}
}

func (d *decoder) id() (id [IDSize]byte) {
	copy(id[:], d.take(IDSize))
	return id
}

func (d *decoder) hash() (h persistence.Hash) {
	copy(h[:], d.take(HashSize))
	return h
}

func (d *decoder) bytes(n uint32) []byte {
	if d.err == nil && uint64(n) > uint64(len(d.b)) {
		d.fail("field of %d bytes is longer than the %d bytes left", n, len(d.b))
		return nil
	}
	return d.take(int(n))
}

func (d *decoder) name() string {
	n := d.u16()
	if n > MaxNameLen {
		d.fail("name is %d bytes, over the limit of %d", n, MaxNameLen)
		return ""
	}
	return string(d.bytes(uint32(n)))
}

func (d *decoder) token() string {
	n := d.u16()
	if n > MaxTokenLen {
		d.fail("token is %d bytes, over the limit of %d", n, MaxTokenLen)
		return ""
	}
	return string(d.bytes(uint32(n)))
}

func (d *decoder) millis() time.Time { return time.UnixMilli(int64(d.u64())) }

func (d *decoder) head() persistence.Head {
	h := persistence.Head{Branch: d.id(), Node: d.id(), Depth: d.u64()}
	h.Base = d.id()
	h.CreatedAt = d.millis()
	return h
}

func (d *decoder) turn() persistence.Node {
	t := persistence.Node{ID: d.id(), Parent: d.id(), Depth: d.u64(), TypeTag: d.u64()}
	t.Codec, t.Flags = d.u32(), d.u32()
	t.PayloadHash = d.hash()
	t.CreatedAt = d.millis()
	t.OverlaySeq = d.u64()
	return t
}

func (d *decoder) turns() []persistence.Node {
	n := d.u32()
	if d.err != nil {
		return nil
	}
	if uint64(n)*TurnSize != uint64(len(d.b)) {
		d.fail("%d turns need %d bytes, the payload has %d", n, uint64(n)*TurnSize, len(d.b))
		return nil
	}
	if n == 0 {
		return nil
	}
	ts := make([]persistence.Node, n)
	for i := range ts {
		ts[i] = d.turn()
	}
	return ts
}

func (d *decoder) finish(t MsgType) error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("%s: %w", t, d.err)
	}
	return nil
}
