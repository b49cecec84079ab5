package pgdb

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// The write path's ops: every write is an op handed to the store's
// committer goroutine (store.go), which commits a group of them in one SQL
// transaction and then wakes their writers.

type opKind int

const (
	opAppend opKind = iota
	opBranch
	opOverlay
	opTx
)

type op struct {
	kind   opKind
	branch messages.BranchID
	append persistence.AppendRequest
	spec   persistence.BranchSpec
	turn   messages.TurnID
	ovReq  persistence.OverlayRequest
	hash   persistence.Hash // of the payload, for appends and patches
	blob   []byte           // the encoded blob
	tx     *persistence.Tx
	parts  []*op // a tx's appends, prepared like single appends

	res  result
	done chan struct{}
}

type result struct {
	turn    persistence.Node
	head    persistence.Head
	overlay persistence.Overlay
	tx      persistence.TxResult
	err     error
}

// submitOp hands o to the committer through ops (unless the store is
// closed: mu guards closed and the sends on ops) and waits for its
// result, or for ctx.
func submitOp(ctx context.Context, mu *sync.RWMutex, closed *bool, ops chan<- *op, o *op) error {
	o.done = make(chan struct{})
	mu.RLock()
	if *closed {
		mu.RUnlock()
		return persistence.ErrClosed
	}
	select {
	case ops <- o:
	case <-ctx.Done():
		mu.RUnlock()
		return ctx.Err()
	}
	mu.RUnlock()
	select {
	case <-o.done:
		return o.res.err
	case <-ctx.Done():
		// The write may still land; a caller that must know uses
		// ExpectParent on its next append.
		return ctx.Err()
	}
}

// statsCounters are what Stats reports.
type statsCounters struct {
	appends, blobWrites, blobDedups, groups, syncs, storedBytes, rawBytes, retries, headRejects atomic.Uint64
	// syncTimes and syncNanos are Stats.SyncTimes and Stats.SyncTime.
	syncTimes [len(persistence.SyncTimeBounds) + 1]atomic.Uint64
	syncNanos atomic.Int64
}

// counted counts a write refused because its branch had moved on
// (Stats.HeadRejects), and returns err.
func (c *statsCounters) counted(err error) error {
	if err != nil && (errors.Is(err, persistence.ErrHeadMismatch) || errors.Is(err, persistence.ErrDuplicate)) {
		c.headRejects.Add(1)
	}
	return err
}

// timeMillis is t at millisecond precision, as the rows keep it.
func timeMillis(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }
