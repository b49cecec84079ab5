// Package frame is the binary frame protocol of the context store
// (specs/context-store-v1.md §6): a persistent connection carrying
// length-prefixed, little-endian frames that map one to one onto
// persistence.Store operations. It holds the wire format (header, message
// payloads, error codes), which the Go client in client/frame shares, and
// the server. docs/FRAME_PROTOCOL.md is the reference.
//
// Every id on the wire is one of the project's 16-byte ULIDs
// (messages.BranchID, messages.NodeID) in its binary form; blob hashes are
// 32-byte BLAKE3-256 digests (persistence.Hash).
package frame

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Version is the highest protocol version this package speaks, exchanged
// in HELLO. Version 2 adds the token to HELLO (TokenVersion); a peer that
// speaks version 1 only is still served (without a token).
const Version uint16 = 2

// TokenVersion is the first version whose HELLO carries a token: a HELLO
// of version 1 has no token field, one of version 2 or higher has one
// (possibly empty) after the name.
const TokenVersion uint16 = 2

// HeaderSize is the size of a frame header: len u32, msg_type u16,
// flags u16, req_id u64, little-endian.
const HeaderSize = 16

// Frame size limits. A frame's size is its payload length (the header's
// len field); the 16-byte header is not counted.
const (
	// DefaultMaxFrame is the default largest frame payload.
	DefaultMaxFrame = 16 << 20
	// FrameOverhead is what a frame carrying one store payload needs
	// beyond the payload itself (APPEND_TURN's fixed fields, with room to
	// spare). A server never accepts frames larger than the store's
	// payload limit plus FrameOverhead.
	FrameOverhead = 64 << 10
	// MinMaxFrame is the smallest maximum frame size a server or client
	// accepts: it must hold every fixed-size message and a page of turns.
	MinMaxFrame = 4 << 10
	// MaxNameLen bounds the peer name carried in HELLO.
	MaxNameLen = 256
	// MaxTokenLen bounds the token carried in HELLO.
	MaxTokenLen = 1024
	// MaxHelloSize is the largest HELLO payload: a server that requires a
	// token reads no larger first frame.
	MaxHelloSize = helloFixedSize + MaxNameLen + 2 + MaxTokenLen
	// MaxErrorMessage bounds the message of an ERROR frame; longer
	// messages are cut.
	MaxErrorMessage = 1024
)

// MsgType is a frame's msg_type. Requests have the high bit clear; the
// answer to a request has the request's type with RespBit set; ERROR
// answers any request.
type MsgType uint16

// The message types of v1.
const (
	MsgHello           MsgType = 0x0001
	MsgCtxCreate       MsgType = 0x0002
	MsgCtxFork         MsgType = 0x0003
	MsgGetHead         MsgType = 0x0004
	MsgAppendTurn      MsgType = 0x0005
	MsgGetLast         MsgType = 0x0006
	MsgGetBefore       MsgType = 0x0007
	MsgGetRangeByDepth MsgType = 0x0008
	MsgGetBlob         MsgType = 0x0009

	// RespBit marks a response: its type is the request's type | RespBit.
	RespBit MsgType = 0x8000
	// MsgError answers a request that failed; its payload is an ErrorReply.
	MsgError MsgType = 0xFFFF
)

var msgNames = [...]string{
	MsgHello:           "HELLO",
	MsgCtxCreate:       "CTX_CREATE",
	MsgCtxFork:         "CTX_FORK",
	MsgGetHead:         "GET_HEAD",
	MsgAppendTurn:      "APPEND_TURN",
	MsgGetLast:         "GET_LAST",
	MsgGetBefore:       "GET_BEFORE",
	MsgGetRangeByDepth: "GET_RANGE_BY_DEPTH",
	MsgGetBlob:         "GET_BLOB",
}

// IsRequest reports whether t is one of the v1 request types.
func (t MsgType) IsRequest() bool { return t >= MsgHello && t <= MsgGetBlob }

// IsResponse reports whether t answers a request (ERROR included).
func (t MsgType) IsResponse() bool {
	return t == MsgError || (t&RespBit != 0 && (t &^ RespBit).IsRequest())
}

// Response returns the type of the answer to request type t.
func (t MsgType) Response() MsgType { return t | RespBit }

// String returns the spec's name of t ("APPEND_TURN", "APPEND_TURN_REPLY").
func (t MsgType) String() string {
	switch {
	case t == MsgError:
		return "ERROR"
	case t.IsRequest():
		return msgNames[t]
	case t.IsResponse():
		return msgNames[t&^RespBit] + "_REPLY"
	}
	return fmt.Sprintf("MSG_%#04x", uint16(t))
}

// Header is a frame header.
type Header struct {
	Len   uint32 // payload bytes after the header
	Type  MsgType
	Flags uint16 // reserved: zero in v1
	ReqID uint64 // chosen by the client, echoed by the server
}

// AppendHeader appends h's 16 bytes to b.
func AppendHeader(b []byte, h Header) []byte {
	b = binary.LittleEndian.AppendUint32(b, h.Len)
	b = binary.LittleEndian.AppendUint16(b, uint16(h.Type))
	b = binary.LittleEndian.AppendUint16(b, h.Flags)
	return binary.LittleEndian.AppendUint64(b, h.ReqID)
}

// ParseHeader decodes the header at the start of b, which must hold at
// least HeaderSize bytes. It does not judge the fields: see CheckRequest.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: header is %d bytes, want %d", ErrMalformed, len(b), HeaderSize)
	}
	return Header{
		Len:   binary.LittleEndian.Uint32(b[0:]),
		Type:  MsgType(binary.LittleEndian.Uint16(b[4:])),
		Flags: binary.LittleEndian.Uint16(b[6:]),
		ReqID: binary.LittleEndian.Uint64(b[8:]),
	}, nil
}

// Protocol errors: a frame that breaks them ends the connection.
var (
	// ErrMalformed is the root of every error about bytes that do not
	// follow the wire format.
	ErrMalformed = errors.New("frame: malformed")
	// ErrFrameTooLarge is returned when a header announces a payload
	// longer than the receiver's maximum frame size.
	ErrFrameTooLarge = errors.New("frame: frame too large")
	// ErrUnknownType is returned for a msg_type the receiver does not
	// expect in that direction.
	ErrUnknownType = errors.New("frame: unknown message type")
	// ErrUnsupportedVersion is returned when the peers share no version.
	ErrUnsupportedVersion = errors.New("frame: unsupported protocol version")
	// ErrUnauthenticated is returned when a server that requires a token
	// gets a first frame that is not a HELLO carrying a valid one.
	ErrUnauthenticated = errors.New("frame: unauthenticated")
)

// checkFrame checks the fields every receiver checks: the size limit
// and the reserved flags.
func checkFrame(h Header, maxFrame int) error {
	if int64(h.Len) > int64(maxFrame) {
		return fmt.Errorf("%w: %s payload is %d bytes, over the limit of %d", ErrFrameTooLarge, h.Type, h.Len, maxFrame)
	}
	if h.Flags != 0 {
		return fmt.Errorf("%w: %s flags %#04x: no flag is defined in v1", ErrMalformed, h.Type, h.Flags)
	}
	return nil
}

// CheckRequest reports whether a server may read h's payload: a request
// type, no flags, at most maxFrame bytes.
func CheckRequest(h Header, maxFrame int) error {
	if !h.Type.IsRequest() {
		return fmt.Errorf("%w %#04x from a client", ErrUnknownType, uint16(h.Type))
	}
	return checkFrame(h, maxFrame)
}

// CheckResponse reports whether a client may read h's payload.
func CheckResponse(h Header, maxFrame int) error {
	if !h.Type.IsResponse() {
		return fmt.Errorf("%w %#04x from a server", ErrUnknownType, uint16(h.Type))
	}
	return checkFrame(h, maxFrame)
}

// Reader reads frames from a stream.
type Reader struct {
	r   *bufio.Reader
	hdr [HeaderSize]byte
}

// NewReader returns a Reader on r with a read buffer of size bytes.
func NewReader(r io.Reader, size int) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, size)}
}

// ReadHeader reads the next header. It returns io.EOF only when the
// stream ends cleanly between frames, io.ErrUnexpectedEOF inside one.
func (r *Reader) ReadHeader() (Header, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return Header{}, err
	}
	return ParseHeader(r.hdr[:])
}

// ReadPayload reads h's payload into a new slice, which the caller owns.
// Check the header first: ReadPayload allocates h.Len bytes.
func (r *Reader) ReadPayload(h Header) ([]byte, error) {
	p := make([]byte, h.Len)
	if _, err := io.ReadFull(r.r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return p, nil
}

// Writer writes frames to a connection from many goroutines. Frames are
// written whole, one at a time; the buffer is flushed when no other
// writer is waiting, so that pipelined answers share system calls.
type Writer struct {
	nc      net.Conn
	timeout time.Duration
	waiting atomic.Int32
	mu      sync.Mutex
	bw      *bufio.Writer
	err     error // sticky: after a failed write every write fails
}

// NewWriter returns a Writer on nc with a buffer of size bytes. When
// timeout is positive, a write that makes no progress for that long fails.
func NewWriter(nc net.Conn, size int, timeout time.Duration) *Writer {
	return &Writer{nc: nc, timeout: timeout, bw: bufio.NewWriterSize(nc, size)}
}

// WriteFrame writes frame (a header and the start of its payload) and
// then tail (the rest of the payload, possibly nil) as one frame.
func (w *Writer) WriteFrame(frame, tail []byte) error {
	w.waiting.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	last := w.waiting.Add(-1) == 0
	if w.err != nil {
		return w.err
	}
	if w.timeout > 0 {
		w.nc.SetWriteDeadline(time.Now().Add(w.timeout))
	}
	if _, err := w.bw.Write(frame); err != nil {
		w.err = err
		return err
	}
	if len(tail) > 0 {
		if _, err := w.bw.Write(tail); err != nil {
			w.err = err
			return err
		}
	}
	if last {
		w.err = w.bw.Flush()
	}
	return w.err
}

// MaxFrameFor returns the largest frame a server in front of a store
// with the given payload limit accepts: want (DefaultMaxFrame when zero or
// negative) capped at maxPayload + FrameOverhead and raised to MinMaxFrame.
func MaxFrameFor(want int, maxPayload int64) int {
	if want <= 0 {
		want = DefaultMaxFrame
	}
	if maxPayload <= 0 {
		maxPayload = persistence.DefaultMaxPayloadBytes
	}
	if c := maxPayload + FrameOverhead; int64(want) > c {
		want = int(min(c, 1<<31-1))
	}
	return max(want, MinMaxFrame)
}

// MaxPageFor returns how many turns fit in one page answer of at most
// maxFrame bytes, capped at persistence.MaxPageNodes.
func MaxPageFor(maxFrame int) int {
	n := (maxFrame - pageFixedSize) / TurnSize
	return max(1, min(n, persistence.MaxPageNodes))
}

// Code is the stable error code of an ERROR frame. Codes 0x01xx are
// protocol errors: the server closes the connection after sending them.
// Codes 0x02xx are request errors and 0x03xx server errors: only that
// request failed and the connection stays open.
type Code uint16

// The error codes of v1. Their numbers never change.
const (
	CodeMalformed          Code = 0x0101 // bytes that do not follow the wire format
	CodeUnknownType        Code = 0x0102 // msg_type is not a request type
	CodeFrameTooLarge      Code = 0x0103 // len is over the server's maximum frame size
	CodeUnsupportedVersion Code = 0x0104 // HELLO asked for a version the server does not speak
	CodeUnauthenticated    Code = 0x0105 // the server requires a token: the first frame was not a HELLO with a valid one

	CodeNotFound         Code = 0x0201 // persistence.ErrNotFound (another kind)
	CodeBranchNotFound   Code = 0x0202 // persistence.ErrBranchNotFound
	CodeTurnNotFound     Code = 0x0203 // persistence.ErrNodeNotFound
	CodeBlobNotFound     Code = 0x0204 // persistence.ErrBlobNotFound
	CodeBranchExists     Code = 0x0205 // persistence.ErrBranchExists
	CodeHeadMismatch     Code = 0x0206 // persistence.ErrHeadMismatch; ErrorReply.Head is the actual head
	CodeInvalidArgument  Code = 0x0207 // persistence.ErrInvalidArgument: the message names the field and limit
	CodeDuplicate        Code = 0x0208 // persistence.ErrDuplicate
	CodeResponseTooLarge Code = 0x0209 // the answer would exceed the client's maximum frame size

	CodeCorrupt     Code = 0x0301 // persistence.ErrCorrupt: stored bytes failed their check
	CodeUnavailable Code = 0x0302 // the store is closed or the server is shutting down
	CodeInternal    Code = 0x0303 // anything else
)

var codeNames = map[Code]string{
	CodeMalformed:          "MALFORMED",
	CodeUnknownType:        "UNKNOWN_TYPE",
	CodeFrameTooLarge:      "FRAME_TOO_LARGE",
	CodeUnsupportedVersion: "UNSUPPORTED_VERSION",
	CodeUnauthenticated:    "UNAUTHENTICATED",
	CodeNotFound:           "NOT_FOUND",
	CodeBranchNotFound:     "BRANCH_NOT_FOUND",
	CodeTurnNotFound:       "TURN_NOT_FOUND",
	CodeBlobNotFound:       "BLOB_NOT_FOUND",
	CodeBranchExists:       "BRANCH_EXISTS",
	CodeHeadMismatch:       "HEAD_MISMATCH",
	CodeInvalidArgument:    "INVALID_ARGUMENT",
	CodeDuplicate:          "DUPLICATE",
	CodeResponseTooLarge:   "RESPONSE_TOO_LARGE",
	CodeCorrupt:            "CORRUPT",
	CodeUnavailable:        "UNAVAILABLE",
	CodeInternal:           "INTERNAL",
}

// String returns the code's name ("HEAD_MISMATCH").
func (c Code) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("CODE_%#04x", uint16(c))
}

// Fatal reports whether the server closes the connection after sending c.
func (c Code) Fatal() bool { return c>>8 == 0x01 }

// Error is a failed request as the peer reported it in an ERROR frame.
// errors.Is matches it against the persistence sentinel its code stands
// for (persistence.ErrHeadMismatch, persistence.ErrBranchNotFound and
// persistence.ErrNotFound, ...) and against ErrMalformed,
// ErrFrameTooLarge and ErrUnknownType for protocol errors.
type Error struct {
	Code    Code
	Message string
	// Head is the branch's actual head for CodeHeadMismatch; zero otherwise.
	Head messages.NodeID
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "frame: " + e.Code.String()
	}
	return "frame: " + e.Code.String() + ": " + e.Message
}

// Is reports whether target is a sentinel that e's code stands for.
func (e *Error) Is(target error) bool {
	for _, s := range codeSentinels[e.Code] {
		if s == target {
			return true
		}
	}
	return false
}

var codeSentinels = map[Code][]error{
	CodeMalformed:          {ErrMalformed},
	CodeUnknownType:        {ErrUnknownType},
	CodeFrameTooLarge:      {ErrFrameTooLarge},
	CodeUnsupportedVersion: {ErrUnsupportedVersion},
	CodeUnauthenticated:    {ErrUnauthenticated},
	CodeNotFound:           {persistence.ErrNotFound},
	CodeBranchNotFound:     {persistence.ErrBranchNotFound, persistence.ErrNotFound},
	CodeTurnNotFound:       {persistence.ErrNodeNotFound, persistence.ErrNotFound},
	CodeBlobNotFound:       {persistence.ErrBlobNotFound, persistence.ErrNotFound},
	CodeBranchExists:       {persistence.ErrBranchExists},
	CodeHeadMismatch:       {persistence.ErrHeadMismatch},
	CodeInvalidArgument:    {persistence.ErrInvalidArgument},
	CodeDuplicate:          {persistence.ErrDuplicate},
	CodeResponseTooLarge:   {ErrFrameTooLarge},
	CodeCorrupt:            {persistence.ErrCorrupt},
	CodeUnavailable:        {persistence.ErrClosed},
}

// ErrorFor returns the ERROR frame that reports err, a store or protocol
// error, to a client.
func ErrorFor(err error) *Error {
	var fe *Error
	if errors.As(err, &fe) {
		return fe
	}
	e := &Error{Code: codeOf(err), Message: err.Error()}
	var hm *persistence.HeadMismatchError
	if errors.As(err, &hm) {
		e.Head = hm.Got
	}
	return e
}

func codeOf(err error) Code {
	// Most specific first: ErrBranchNotFound wraps ErrNotFound.
	for _, c := range []Code{
		CodeBranchNotFound, CodeTurnNotFound, CodeBlobNotFound, CodeNotFound,
		CodeHeadMismatch, CodeBranchExists, CodeInvalidArgument, CodeDuplicate,
		CodeCorrupt, CodeUnavailable,
		CodeFrameTooLarge, CodeUnknownType, CodeUnsupportedVersion, CodeUnauthenticated, CodeMalformed,
	} {
		if errors.Is(err, codeSentinels[c][0]) {
			return c
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return CodeUnavailable
	}
	return CodeInternal
}
