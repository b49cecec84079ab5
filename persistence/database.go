package persistence

import (
	"context"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// Database is everything the runtime asks of its store: the context
// store and the tables above it. The actors, the servers and the
// ctxinf binary take a Database; *badgerdb.DB, the Badger database
// (badgerdb.Open), and *pgdb.PGDB, the PostgreSQL one (docs/STORE.md),
// implement it.
//
// It holds exactly the methods the code outside the engines calls.
// Left out, and reached on an engine's database or through an optional
// interface when a caller needs them:
//
//   - Compact, Badger's value-log GC and LSM flattening, for benchmarks
//     and maintenance: Compact(s Store) asserts interface{ Compact() error }
//     and does nothing on an engine without it.
//   - CorruptSnapshot, a fault a test injects (tests assert it the same
//     way).
//   - Events, read by ActorLog only.
//
// The callers of badgerdb.Open keep the *badgerdb.DB it returns:
// actors.New (the runtime) stores it as its Database at once; ctxinf
// inspect tests it against nil (a nil *DB in a Database is not a nil
// Database); ctxinf bench's frame benchmark and the tests that open a
// store of their own use only its Store methods, or CorruptSnapshot.
type Database interface {
	// The context store: the turn DAG, blobs, heads and overlays. Writes
	// other than CreateBranch and Append (which the frame protocol uses)
	// go through Commit.
	Store

	// Lifecycle rows (SRD §16) and Commit, the one way they are written:
	// atomically with the context-store appends and the actor event that
	// caused them. A row that does not exist is an error that errors.Is
	// ErrNotFound.

	// Commit writes tx atomically. It returns once tx is durable.
	Commit(ctx context.Context, tx *Tx) (TxResult, error)
	// Session returns a session's row.
	Session(ctx context.Context, id messages.SessionID) (SessionRow, error)
	// Sessions returns every session's row, of every tenant: for the
	// runtime's own sweeps (retention, reindex), never for a listing.
	Sessions(ctx context.Context) ([]SessionRow, error)
	// SessionPage returns a page of one tenant's sessions (SessionQuery),
	// reading no other tenant's rows.
	SessionPage(ctx context.Context, q SessionQuery) ([]SessionRow, error)
	// Import returns the marker of session's import, if it is under way
	// (ErrNotFound otherwise).
	Import(ctx context.Context, session messages.SessionID) (ImportRow, error)
	// Imports returns the imports under way (or cut short by a crash).
	Imports(ctx context.Context) ([]ImportRow, error)
	// BranchRow returns a branch's row.
	BranchRow(ctx context.Context, id messages.BranchID) (BranchRow, error)
	// Branches returns the rows of a session's branches.
	Branches(ctx context.Context, session messages.SessionID) ([]BranchRow, error)
	// BranchPage returns up to limit (1 to MaxPageNodes) of session's
	// branch rows whose ids follow after (zero: from the first), in the
	// order of their ids.
	BranchPage(ctx context.Context, session messages.SessionID, after messages.BranchID, limit int) ([]BranchRow, error)
	// TurnRows returns up to limit turn rows of branch from fromSeq on,
	// in seq order.
	TurnRows(ctx context.Context, branch messages.BranchID, fromSeq uint64, limit int) ([]TurnRow, error)
	// TurnRow returns the row of turn on branch, found by its id (a turn
	// of branch's parent, which a fork sees, is not on branch).
	TurnRow(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (TurnRow, error)
	// EachTurnRow calls fn for every turn row of branch in seq order, and
	// stops at fn's first error, which it returns.
	EachTurnRow(ctx context.Context, branch messages.BranchID, fn func(TurnRow) error) error
	// TurnBranches returns the branches that have a lifecycle row of
	// turn: the branch that ran it and the forks that carried it as
	// pending, in the order of their ids.
	TurnBranches(ctx context.Context, turn messages.TurnID) ([]messages.BranchID, error)
	// StateRow returns the state committed on branch at seq.
	StateRow(ctx context.Context, branch messages.BranchID, seq uint64) (StateRow, error)
	// StateRows returns the states committed on branch from seq on, in
	// order.
	StateRows(ctx context.Context, branch messages.BranchID, fromSeq uint64, limit int) ([]StateRow, error)
	// StepRow returns the row of step, found by its id.
	StepRow(ctx context.Context, step messages.StepID) (StepRow, error)
	// Steps returns the provider steps of turn, in order.
	Steps(ctx context.Context, turn messages.TurnID) ([]StepRow, error)
	// Jobs returns every pending job, in branch order and then creation
	// order (the order the reconciler re-enqueues them in).
	Jobs(ctx context.Context) ([]Job, error)

	// Actor logs: protoactor-go's persistence provider, and the snapshots
	// it keeps.

	// ActorLog returns the persistence provider; actors snapshot every
	// snapshotEvery events (0: never).
	ActorLog(snapshotEvery int) *ActorLog
	// Snapshot returns actor's latest snapshot, if it has one.
	Snapshot(ctx context.Context, actor string) (EventRecord, bool, error)
	// PrevSnapshot returns the snapshot actor had before its latest, the
	// fallback of an unreadable latest one, if it has one.
	PrevSnapshot(ctx context.Context, actor string) (EventRecord, bool, error)

	// Retrieval rows: chunks and their vectors.

	// Chunks returns the chunk rows of turn.
	Chunks(ctx context.Context, turn messages.TurnID) ([]ChunkRow, error)
	// ChunkByID returns the chunk row of id (ErrNotFound if none).
	ChunkByID(ctx context.Context, id messages.ChunkID) (ChunkRow, error)
	// BranchChunks calls fn with every chunk of branch's partition, in
	// seq order, and stops at fn's first error, which it returns.
	BranchChunks(ctx context.Context, branch messages.BranchID, fn func(ChunkDoc) error) error
	// BranchChunkVectors is BranchChunks with each chunk's vector in
	// namespace ns (nil if it has none), read with the chunks rather
	// than one read per chunk: what rebuilding a branch's index reads.
	BranchChunkVectors(ctx context.Context, ns string, branch messages.BranchID, fn func(ChunkDoc, []float32) error) error
	// Vector returns the vector of chunk in namespace ns, or nil if it
	// has none.
	Vector(ctx context.Context, ns string, chunk messages.ChunkID) ([]float32, error)

	// The proxy index: which branch an OpenAI- or Anthropic-compatible
	// request continues, per tenant.

	// ProxyLookup returns the target of the entry of kind named name in
	// tenant's index, or ErrProxyNotFound.
	ProxyLookup(ctx context.Context, tenant string, kind ProxyKind, name []byte) (ProxyTarget, error)
	// ProxyLongestPrefix returns, of hashes (the hashes of a
	// transcript's prefixes, shortest first), the index of the last one
	// tenant's index holds and its target; -1 if none.
	ProxyLongestPrefix(ctx context.Context, tenant string, hashes [][32]byte) (int, ProxyTarget, error)
	// ClaimProxyKey enters key as the conversation key of branch in
	// tenant's index unless it names a conversation there already, and
	// returns the conversation it names now.
	ClaimProxyKey(ctx context.Context, tenant, key string, branch messages.BranchID) (ProxyTarget, error)

	// Idempotency keys.

	// IdempotencyKey returns the row of key in scope and owner, or
	// ErrKeyNotFound.
	IdempotencyKey(ctx context.Context, scope KeyScope, owner messages.BranchID, key string) (IdempotencyRow, error)

	// Tenancy (it implements frame.Tenancy).

	// BranchTenant returns the tenant that owns a branch; a branch that
	// does not exist is the error Head returns for it.
	BranchTenant(ctx context.Context, branch messages.BranchID) (string, error)
	// TurnTenant returns the tenant that owns a turn: its root's; a turn
	// that does not exist is the error Turn returns for it.
	TurnTenant(ctx context.Context, turn messages.TurnID) (string, error)

	// Retention.

	// SessionActivity returns session id's row, its last activity and
	// whether a turn of it is in flight, read at one point in time.
	SessionActivity(ctx context.Context, id messages.SessionID) (SessionActivity, error)
	// SetSessionRetention sets session id's own retention (nil: its
	// tenant's; 0: forever) and returns its row.
	SetSessionRetention(ctx context.Context, id messages.SessionID, idle *time.Duration) (SessionRow, error)
	// RetentionJob returns the retention job's record (the zero record
	// if the job never ran).
	RetentionJob(ctx context.Context) (RetentionJob, error)

	// Hard delete (SRD §14.4).

	// Purge deletes what spec names, for good, and returns once its
	// bytes are gone from the store (Badger: from its files; PostgreSQL:
	// from its tables, vacuumed: docs/STORE.md says what stays).
	Purge(ctx context.Context, spec PurgeSpec) (PurgeResult, error)
	// PurgeSessions deletes the sessions specs name as Purge does, all
	// or nothing; the results are in specs' order.
	PurgeSessions(ctx context.Context, specs []PurgeSpec) ([]PurgeResult, error)

	// Limits, space and the journals' cipher: asked on the request path,
	// so in the interface rather than optional. An engine with nothing to
	// say returns nil from CheckSpace and Cipher.

	// MaxPayloadBytes is the largest payload the store appends
	// (store.max_payload_bytes).
	MaxPayloadBytes() int64
	// CheckPayload refuses a payload of n bytes that the store would
	// refuse to append, naming field.
	CheckPayload(field string, n int) error
	// CheckSpace returns a *SpaceError (errors.Is ErrNoSpace) when the
	// store has less room than new work needs; nil otherwise. The
	// runtime asks before it accepts new work.
	CheckSpace() error
	// Cipher is the cipher of an encrypted store, for its stream
	// journals (JournalPolicy.Cipher, RecoverJournal); nil when the
	// store is not encrypted.
	Cipher() *Cipher
}

// Lifecycle is the read and write side of the lifecycle tables; both
// engines implement it.
type Lifecycle interface {
	Commit(ctx context.Context, tx *Tx) (TxResult, error)
	Session(ctx context.Context, id messages.SessionID) (SessionRow, error)
	Sessions(ctx context.Context) ([]SessionRow, error)
	BranchRow(ctx context.Context, id messages.BranchID) (BranchRow, error)
	Branches(ctx context.Context, session messages.SessionID) ([]BranchRow, error)
	TurnRows(ctx context.Context, branch messages.BranchID, fromSeq uint64, limit int) ([]TurnRow, error)
	TurnRow(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (TurnRow, error)
	StateRow(ctx context.Context, branch messages.BranchID, seq uint64) (StateRow, error)
	Jobs(ctx context.Context) ([]Job, error)
	Chunks(ctx context.Context, turn messages.TurnID) ([]ChunkRow, error)
	Events(ctx context.Context, actor string, from uint64, fn func(index uint64, data []byte) error) error
	Snapshot(ctx context.Context, actor string) (EventRecord, bool, error)
}
