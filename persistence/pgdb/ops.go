package pgdb

import (
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/commit"
)

// The write path's ops: every write is an op handed to the store's
// committer goroutine (store.go) through a commit.Queue, which commits a
// group of them in one SQL transaction and then wakes their writers.

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

	res result
	commit.Call
}

type result struct {
	turn    persistence.Node
	head    persistence.Head
	overlay persistence.Overlay
	tx      persistence.TxResult
	err     error
}

// timeMillis is t at millisecond precision, as the rows keep it.
func timeMillis(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }
