// Package persistence is ContextInfinity's durable storage: the context
// store (an immutable transcript DAG over a content-addressed blob store, with
// mutable branch heads), the lifecycle tables and the actor logs.
//
// This package is what every engine shares: the row types, Tx and its
// checks, the errors, the interfaces (Store, Database), the encodings
// both databases store (blobs, node records and their skip pointers,
// partition entries), the actor logs over any Database, the stream
// journals and the cipher. The engines are packages of their own: Badger
// (package badgerdb), PostgreSQL (package pgdb) and memory (package
// memstore); the conformance kit every engine runs is package storetest.
//
// Store is the context store. Database is Store and the tables above
// it, everything the runtime asks of its store; the runtime (actors, the
// servers, the ctxinf binary) takes a Database, which badgerdb.DB and
// pgdb.PGDB implement. Engine-specific maintenance (Compact) is reached
// through optional interfaces, not Database.
//
// This package imports no storage engine.
package persistence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// Sentinel errors. Callers test them with errors.Is; the returned errors
// wrap them with the id, field or limit involved.
var (
	// ErrNotFound is the root of every "does not exist" error.
	ErrNotFound = errors.New("persistence: not found")
	// ErrBranchNotFound is returned when no branch has the given id.
	ErrBranchNotFound = fmt.Errorf("%w: branch", ErrNotFound)
	// ErrNodeNotFound is returned when no node has the given id.
	ErrNodeNotFound = fmt.Errorf("%w: turn", ErrNotFound)
	// ErrBlobNotFound is returned when no blob has the given hash (or it
	// was purged by an overlay).
	ErrBlobNotFound = fmt.Errorf("%w: blob", ErrNotFound)
	// ErrBranchExists is returned by CreateBranch when the id is taken.
	ErrBranchExists = errors.New("persistence: branch already exists")
	// ErrHeadMismatch is returned by Append when the branch head is not
	// the parent the caller expected; nothing was written.
	ErrHeadMismatch = errors.New("persistence: branch head is not the expected parent")
	// ErrInvalidArgument is the root of every bad-input error.
	ErrInvalidArgument = errors.New("persistence: invalid argument")
	// ErrTooLarge is returned (beside ErrInvalidArgument) for a payload
	// over Limits.MaxPayloadBytes.
	ErrTooLarge = fmt.Errorf("%w: too large", ErrInvalidArgument)
	// ErrCorrupt is returned when stored bytes fail their integrity check.
	ErrCorrupt = errors.New("persistence: corrupt data")
	// ErrDuplicate is returned when a write would break a uniqueness rule:
	// a turn id, (branch, turn_seq) or (branch, state_seq) already taken.
	ErrDuplicate = errors.New("persistence: duplicate")
	// ErrLocked is returned by Open when another process has the store
	// open (a running ctxinf serve, say).
	ErrLocked = errors.New("persistence: the store is in use by another process")
	// ErrClosed is returned by every call made after Close.
	ErrClosed = errors.New("persistence: store is closed")
	// ErrUnavailable is returned (beside the driver's error, whose text
	// the error keeps) by a call of the PostgreSQL store that could not
	// reach the database or whose connection the server ended: it may
	// succeed once the database is back. A write may also be
	// ErrOutcomeUnknown.
	ErrUnavailable = errors.New("persistence: the database is unreachable")
)

// DefaultMaxPayloadBytes is the default limit on one node's payload.
const DefaultMaxPayloadBytes = 8 << 20

// MaxPageNodes is the largest number of nodes one paging call returns.
const MaxPageNodes = 10_000

// Turn flags. The low 16 bits are the caller's; the store sets the high ones
// on returned nodes to describe overlays.
const (
	// FlagPatched: an overlay replaced the payload; PayloadHash is the new one.
	FlagPatched uint32 = 1 << 30
	// FlagTombstoned: an overlay deleted the payload; PayloadHash is zero.
	FlagTombstoned uint32 = 1 << 31
	// CallerFlagsMask selects the flags a caller may set on Append.
	CallerFlagsMask uint32 = 0xFFFF
)

// Node is an immutable node of the transcript DAG: one message (see
// messages.NodeID). Nodes read through a view with overlays carry the
// effective PayloadHash and the overlay flags.
type Node struct {
	ID          messages.NodeID
	Parent      messages.NodeID // zero for a root node
	Depth       uint64          // root depth is 0; a child is parent depth + 1
	TypeTag     uint64          // the caller's payload type
	Codec       uint32          // the caller's payload encoding
	PayloadHash Hash
	Flags       uint32
	CreatedAt   time.Time // millisecond precision
	OverlaySeq  uint64    // the overlay applied by the view; 0 if none
}

// Head is a branch: a mutable pointer to a node. An empty branch has a
// zero Node; its first append creates a root node.
type Head struct {
	Branch    messages.BranchID
	Node      messages.NodeID // zero for an empty branch
	Depth     uint64          // depth of Node; 0 when empty
	Base      messages.NodeID // the node the branch was created at (zero: empty)
	CreatedAt time.Time
}

// Empty reports whether the branch has no nodes.
func (h Head) Empty() bool { return h.Node.IsZero() }

// Len is the number of nodes on the branch's chain.
func (h Head) Len() uint64 {
	if h.Empty() {
		return 0
	}
	return h.Depth + 1
}

// BranchSpec says how to create a branch.
type BranchSpec struct {
	// ID of the new branch; zero means the store makes one.
	ID messages.BranchID
	// At is the node the new branch's head points at: zero for an empty
	// branch, any existing node for a fork. No history is copied.
	At messages.NodeID
	// Tenant, when not "" nor DefaultTenant, is recorded as the branch's
	// owner with it (DB.BranchTenant), and as the owner of the root node
	// its first append makes (DB.TurnTenant). The Badger store (DB) and
	// PostgreSQL's (pgdb.PGDB, and the store it is built on) record it; at
	// most MaxTenantName bytes.
	Tenant string
}

// AppendRequest is one node to add at a branch's head.
type AppendRequest struct {
	Payload []byte
	TypeTag uint64
	Codec   uint32
	Flags   uint32 // only CallerFlagsMask bits
	// ExpectParent, when set, makes the append fail with ErrHeadMismatch
	// unless the branch head is exactly this node (zero: the branch must
	// be empty). It lets one writer detect that another moved the head.
	ExpectParent *messages.NodeID
}

// Page is a run of nodes in chronological order (oldest first) with the
// cursor for the next older page: pass Next to Before. Next is zero when
// the page reaches the root.
type Page struct {
	Nodes []Node
	Next  messages.NodeID
}

// RangePage is the answer to a depth-range query: the nodes at depths
// [start, start+limit) of the branch, chronological, and the head depth.
type RangePage struct {
	Nodes     []Node
	HeadDepth uint64
	Empty     bool // the branch has no turns
}

// OverlayRequest describes a redaction of a node's payload.
type OverlayRequest struct {
	// Payload replaces the node's payload (a patch). Nil with Tombstone
	// set deletes it.
	Payload   []byte
	Tombstone bool
	// Purge releases the superseded payload: its reference is dropped and
	// the blob is deleted when nothing else references it. Views as of
	// before this overlay then report ErrBlobNotFound for that payload.
	Purge bool
}

// Overlay is a stored redaction. Seq is global and strictly increasing.
type Overlay struct {
	Node      messages.NodeID
	Seq       uint64
	Hash      Hash // new payload; zero for a tombstone
	Tombstone bool
	Purged    Hash // the payload this overlay released, if Purge was set
	CreatedAt time.Time
}

// Reader is the read side of the context store. Reads see only durable
// state: a head is never visible before the node it points at is durable.
type Reader interface {
	// Head returns the branch's head.
	Head(ctx context.Context, branch messages.BranchID) (Head, error)
	// Node returns one node.
	Node(ctx context.Context, id messages.NodeID) (Node, error)
	// Blob returns the payload bytes stored under h, verified against h.
	Blob(ctx context.Context, h Hash) ([]byte, error)
	// Last returns the last n nodes of a branch, oldest first.
	Last(ctx context.Context, branch messages.BranchID, n int) (Page, error)
	// Before returns up to n nodes strictly older than the node before on
	// its ancestry, oldest first. Pass the previous page's Next.
	Before(ctx context.Context, before messages.NodeID, n int) (Page, error)
	// Chain returns every node from the root to id, oldest first.
	Chain(ctx context.Context, id messages.NodeID) ([]Node, error)
	// Range returns the branch's nodes at depths [start, start+limit).
	Range(ctx context.Context, branch messages.BranchID, start uint64, limit int) (RangePage, error)
}

// Store is the context store: an immutable transcript DAG over a content-addressed
// blob store, with branch heads that fork in O(1).
type Store interface {
	Reader
	// CreateBranch creates an empty branch or a fork at an existing node.
	CreateBranch(ctx context.Context, spec BranchSpec) (Head, error)
	// Append adds a node at the branch head and moves the head to it. It
	// returns once the node and the new head are durable.
	Append(ctx context.Context, branch messages.BranchID, req AppendRequest) (Node, error)
	// Children lists the nodes whose parent is id, oldest first.
	Children(ctx context.Context, id messages.NodeID) ([]messages.NodeID, error)
	// PutOverlay records a patch or tombstone on a node.
	PutOverlay(ctx context.Context, turn messages.NodeID, req OverlayRequest) (Overlay, error)
	// Overlays lists a node's overlays, oldest first.
	Overlays(ctx context.Context, turn messages.NodeID) ([]Overlay, error)
	// OverlaySeq returns the highest overlay sequence number so far.
	OverlaySeq(ctx context.Context) (uint64, error)
	// AsOf returns a view that applies only overlays with Seq <= seq;
	// AsOf(0) shows every node as first written. The Store itself reads
	// with every overlay applied.
	AsOf(seq uint64) Reader
	// BlobRefs returns how many nodes and overlays reference a blob.
	BlobRefs(ctx context.Context, h Hash) (uint64, error)
	// Stats returns counters about the store's work so far.
	Stats() Stats
	// Close releases the store. Appends in flight finish first.
	Close() error
}

// Stats are counters of a store's work since it was opened.
type Stats struct {
	Appends     uint64 // turns appended
	BlobWrites  uint64 // new blobs written
	BlobDedups  uint64 // appends whose payload was already stored
	Groups      uint64 // group commits (one sync each when durable)
	Syncs       uint64
	StoredBytes uint64 // blob bytes written (after compression)
	RawBytes    uint64 // blob bytes accepted (before compression)
	// Retries counts group transactions tried again after a serialization
	// failure, a lost head compare-and-swap or a connection lost before
	// COMMIT (the PostgreSQL store; always 0 for the others).
	Retries uint64
	// HeadRejects counts writes refused because their branch had moved
	// on: its head was not the one they expected (ErrHeadMismatch), or a
	// position they wrote (a turn's or a state's seq, an actor's event
	// index, an idempotency key) was taken (ErrDuplicate). In a cluster,
	// the commits of a stale activation, which the head's
	// compare-and-swap keeps out (docs/CLUSTER.md); on one runtime, 0.
	HeadRejects uint64
	// SyncTimes counts the durable group commits by how long their write
	// and sync took, which every writer in the group waited for: bucket i
	// holds those under SyncTimeBounds[i] (and at or over the bound
	// before it), the last one those at or over the last bound. The
	// disk's stalls show here first.
	SyncTimes [len(SyncTimeBounds) + 1]uint64
	SyncTime  time.Duration // their total
}

// SyncTimeBounds are the upper bounds of the buckets of Stats.SyncTimes.
var SyncTimeBounds = [...]time.Duration{250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond,
	2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond, 16 * time.Millisecond, 32 * time.Millisecond,
	64 * time.Millisecond}

// SyncTimeBucket returns the bucket of Stats.SyncTimes that d falls in.
func SyncTimeBucket(d time.Duration) int {
	for i, b := range SyncTimeBounds {
		if d < b {
			return i
		}
	}
	return len(SyncTimeBounds)
}

// SyncsOver returns how many of the syncs counted in times took at
// least bound when bound is one of SyncTimeBounds; for any other bound
// it counts the whole bucket that holds bound too.
func SyncsOver(times [len(SyncTimeBounds) + 1]uint64, bound time.Duration) uint64 {
	var n uint64
	for i := SyncTimeBucket(bound); i < len(times); i++ {
		n += times[i]
	}
	return n
}

// Limits are the bounds a store enforces on input.
type Limits struct {
	MaxPayloadBytes int64
}

func (l Limits) checkPayload(field string, p []byte) error {
	if len(p) == 0 {
		return fmt.Errorf("%w: %s is empty", ErrInvalidArgument, field)
	}
	return l.CheckSize(field, len(p))
}

// CheckSize refuses a payload of n bytes over the limit.
func (l Limits) CheckSize(field string, n int) error {
	if int64(n) > l.MaxPayloadBytes {
		return fmt.Errorf("%w: %s is %d bytes, over the limit of %d (store.max_payload_bytes)",
			ErrTooLarge, field, n, l.MaxPayloadBytes)
	}
	return nil
}

// CheckPageSize refuses a page limit out of [0, MaxPageNodes].
func CheckPageSize(n int) error {
	if n < 0 || n > MaxPageNodes {
		return fmt.Errorf("%w: limit %d is out of range [0, %d]", ErrInvalidArgument, n, MaxPageNodes)
	}
	return nil
}

var (
	errZeroBranch = fmt.Errorf("%w: branch id is zero", ErrInvalidArgument)
	errZeroNode   = fmt.Errorf("%w: turn id is zero", ErrInvalidArgument)
)

// CheckBranchID returns an ErrInvalidArgument for a zero branch id, which
// names no branch.
func CheckBranchID(b messages.BranchID) error {
	if b.IsZero() {
		return errZeroBranch
	}
	return nil
}

// CheckNodeID returns an ErrInvalidArgument for a zero node id, which
// names no node.
func CheckNodeID(id messages.NodeID) error {
	if id.IsZero() {
		return errZeroNode
	}
	return nil
}

// CheckAppend refuses an append to branch that no engine takes: a zero
// branch, flags the store owns, a payload empty or over lim. Engines call
// it before anything else, so that a refused append changes nothing.
func CheckAppend(branch messages.BranchID, req AppendRequest, lim Limits) error {
	if branch.IsZero() {
		return errZeroBranch
	}
	if req.Flags&^CallerFlagsMask != 0 {
		return fmt.Errorf("%w: flags %#x use bits outside %#x", ErrInvalidArgument, req.Flags, CallerFlagsMask)
	}
	return lim.checkPayload("payload", req.Payload)
}

// CheckOverlay refuses an overlay of node that no engine takes, as
// CheckAppend does an append.
func CheckOverlay(turn messages.NodeID, req OverlayRequest, lim Limits) error {
	if turn.IsZero() {
		return errZeroNode
	}
	if req.Tombstone {
		if req.Payload != nil {
			return fmt.Errorf("%w: overlay payload must be nil for a tombstone", ErrInvalidArgument)
		}
		return nil
	}
	return lim.checkPayload("overlay payload", req.Payload)
}

// HeadMismatchError is the ErrHeadMismatch returned by Append.
type HeadMismatchError struct {
	Branch    messages.BranchID
	Want, Got messages.NodeID
}

func (e *HeadMismatchError) Error() string {
	return fmt.Sprintf("persistence: branch %s: head is %q, expected parent %q", e.Branch, e.Got, e.Want)
}

// Is makes errors.Is(err, ErrHeadMismatch) true.
func (e *HeadMismatchError) Is(target error) bool { return target == ErrHeadMismatch }

// BranchNotFound, NodeNotFound and BlobNotFound are the errors the store
// returns for a branch, a node or a blob that does not exist: a caller
// that hides something the store has (another tenant's) answers in the
// same words.
func BranchNotFound(id messages.BranchID) error { return branchNotFound(id) }
func NodeNotFound(id messages.NodeID) error     { return nodeNotFound(id) }
func BlobNotFound(h Hash) error                 { return blobNotFound(h) }

func branchNotFound(id messages.BranchID) error {
	return fmt.Errorf("%w %s", ErrBranchNotFound, id)
}

func nodeNotFound(id messages.NodeID) error {
	return fmt.Errorf("%w %s", ErrNodeNotFound, id)
}

func blobNotFound(h Hash) error {
	return fmt.Errorf("%w %s", ErrBlobNotFound, h)
}

// Compact compacts s if its engine compacts (Badger: value-log GC and
// LSM flattening); for other stores it does nothing.
func Compact(s Store) error {
	if c, ok := s.(interface{ Compact() error }); ok {
		return c.Compact()
	}
	return nil
}
