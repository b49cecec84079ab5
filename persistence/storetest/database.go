package storetest

import (
	"context"
	"testing"

	"github.com/contextinfinity/ctxinf/persistence"
)

// DB is a persistence.Database with what the tests also reach on every
// engine: the actor logs' events and a snapshot corrupted on purpose.
type DB interface {
	persistence.Database
	Events(ctx context.Context, actor string, from uint64, fn func(index uint64, data []byte) error) error
	CorruptSnapshot(ctx context.Context, actor string) error
}

// DBEngine is one Database implementation under test.
type DBEngine struct {
	Name string
	// Open opens the database kept in dir, creating it if needed: a
	// fresh one for a fresh dir, the same one again for the same dir.
	Open func(t *testing.T, dir string) DB
}

// databaseTests lists the Database conformance tests, each run against
// every engine; a test with reopen also closes its database and opens it
// again.
var databaseTests = []struct {
	name   string
	fn     func(t *testing.T, d DB)
	reopen func(t *testing.T, d DB, reopen func() DB)
}{
	{"TxIsAtomic", testTxIsAtomic, nil},
	{"TxRowsAndJobs", testTxRowsAndJobs, nil},
	{"TxStepRows", testTxStepRows, nil},
	{"StepRowKeepsRawExchange", testStepRowKeepsRawExchange, nil},
	{"ActorLogReplaysAfterPanicAndRestart", testActorLogReplaysAfterPanicAndRestart, nil},
	{"RetrievalTables", testRetrievalTables, nil},
	{"ActorLogFallsBackToPreviousSnapshot", testActorLogFallsBackToPreviousSnapshot, nil},
	{"ActorLogReplaysAllWithoutReadableSnapshot", testActorLogReplaysAllWithoutReadableSnapshot, nil},
	{"IdempotencyKeys", nil, testIdempotencyKeys},
	{"ProxyIndex", nil, testProxyIndex},
	{"SessionActivity", testSessionActivity, nil},
	{"Tenancy", nil, testTenancy},
	{"LifecycleReads", testLifecycleReads, nil},
	{"TxAllOrNothing", testTxAllOrNothing, nil},
	{"ImportRows", nil, testImportRows},
	{"DropBranches", testDropBranches, nil},
}

// RunDatabase runs every Database conformance test against each engine,
// as subtests named test/engine, on a fresh database each.
func RunDatabase(t *testing.T, engines ...DBEngine) {
	for _, c := range databaseTests {
		t.Run(c.name, func(t *testing.T) {
			for _, e := range engines {
				t.Run(e.Name, func(t *testing.T) {
					dir := t.TempDir()
					cur := e.Open(t, dir)
					t.Cleanup(func() { cur.Close() })
					if c.fn != nil {
						c.fn(t, cur)
						return
					}
					c.reopen(t, cur, func() DB {
						if err := cur.Close(); err != nil {
							t.Fatal(err)
						}
						cur = e.Open(t, dir)
						return cur
					})
				})
			}
		})
	}
}
