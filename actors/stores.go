package actors

import (
	"context"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// The roles the store plays for the actors, each what one consumer uses
// of persistence.Database: the consumer takes the role, and the runtime
// hands it its database (retrieval's is chunkRows).

// messageReader reads a transcript node's message: its turn, then its
// payload (readMessage).
type messageReader interface {
	Node(ctx context.Context, id messages.NodeID) (persistence.Node, error)
	Blob(ctx context.Context, h persistence.Hash) ([]byte, error)
}

// branchRows is what a branch actor reads of the store beside its event
// log: its transcript nodes, the rows of its turns, states and steps,
// the idempotency keys of its turns, whether its session's import is
// under way, and the store's limits and cipher. It writes only through
// its log (branchLog, and the persistence provider the root gives it).
type branchRows interface {
	messageReader
	BranchRow(ctx context.Context, id messages.BranchID) (persistence.BranchRow, error)
	TurnRows(ctx context.Context, branch messages.BranchID, fromSeq uint64, limit int) ([]persistence.TurnRow, error)
	TurnRow(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (persistence.TurnRow, error)
	StateRow(ctx context.Context, branch messages.BranchID, seq uint64) (persistence.StateRow, error)
	StepRow(ctx context.Context, step messages.StepID) (persistence.StepRow, error)
	Steps(ctx context.Context, turn messages.TurnID) ([]persistence.StepRow, error)
	IdempotencyKey(ctx context.Context, scope persistence.KeyScope, owner messages.BranchID, key string) (persistence.IdempotencyRow, error)
	Import(ctx context.Context, session messages.SessionID) (persistence.ImportRow, error)
	CheckPayload(field string, n int) error
	Cipher() *persistence.Cipher
}

// branchLog is the actor log as a branch actor drives it beyond
// persisting: committing the events it held (persistence.ActorLog).
type branchLog interface {
	Flush(actor string)
}

// purger is what deleting sessions and branches (delete.go) and the
// retention job (retention.go) use of the store: sessions' and
// branches' rows, sessions' activity and own retention, the purge, and
// the retention job's record.
type purger interface {
	Session(ctx context.Context, id messages.SessionID) (persistence.SessionRow, error)
	Sessions(ctx context.Context) ([]persistence.SessionRow, error)
	BranchRow(ctx context.Context, id messages.BranchID) (persistence.BranchRow, error)
	Branches(ctx context.Context, session messages.SessionID) ([]persistence.BranchRow, error)
	SessionActivity(ctx context.Context, id messages.SessionID) (persistence.SessionActivity, error)
	SetSessionRetention(ctx context.Context, id messages.SessionID, idle *time.Duration) (persistence.SessionRow, error)
	RetentionJob(ctx context.Context) (persistence.RetentionJob, error)
	Purge(ctx context.Context, spec persistence.PurgeSpec) (persistence.PurgeResult, error)
	PurgeSessions(ctx context.Context, specs []persistence.PurgeSpec) ([]persistence.PurgeResult, error)
	Commit(ctx context.Context, tx *persistence.Tx) (persistence.TxResult, error)
}
