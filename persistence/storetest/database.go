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
	// Holding returns where marker is still stored in the database kept
	// in dir: for Badger the files holding it, for PostgreSQL the tables.
	Holding func(t *testing.T, dir, marker string) []string
	// Compact compacts d's storage; nil when the engine has none.
	Compact func(d DB) error
}

// Env is what a test reaches of its database beyond the Database.
type Env struct {
	// Reopen closes the database and opens it again.
	Reopen func() DB
	// Holding returns where marker is still stored (DBEngine.Holding).
	Holding func(t *testing.T, marker string) []string
	// Compact compacts the database's storage; nil when the engine has
	// none.
	Compact func() error
}

// databaseTests lists the Database conformance tests, each run against
// every engine; a test with reopen also closes its database and opens it
// again.
var databaseTests = []struct {
	name    string
	fn      func(t *testing.T, d DB, e Env)
	compact bool // runs only on an engine with compaction
}{
	{"TxIsAtomic", plain(testTxIsAtomic), false},
	{"TxRowsAndJobs", plain(testTxRowsAndJobs), false},
	{"TxStepRows", plain(testTxStepRows), false},
	{"StepRowKeepsRawExchange", plain(testStepRowKeepsRawExchange), false},
	{"ActorLogReplaysAfterPanicAndRestart", plain(testActorLogReplaysAfterPanicAndRestart), false},
	{"RetrievalTables", plain(testRetrievalTables), false},
	{"ActorLogFallsBackToPreviousSnapshot", plain(testActorLogFallsBackToPreviousSnapshot), false},
	{"ActorLogReplaysAllWithoutReadableSnapshot", plain(testActorLogReplaysAllWithoutReadableSnapshot), false},
	{"IdempotencyKeys", reopening(testIdempotencyKeys), false},
	{"ProxyIndex", reopening(testProxyIndex), false},
	{"SessionActivity", plain(testSessionActivity), false},
	{"Tenancy", reopening(testTenancy), false},
	{"LifecycleReads", plain(testLifecycleReads), false},
	{"SessionPages", reopening(testSessionPages), false},
	{"TxAllOrNothing", plain(testTxAllOrNothing), false},
	{"ImportRows", reopening(testImportRows), false},
	{"DropBranches", plain(testDropBranches), false},
	{"BranchChunkVectors", plain(testBranchChunkVectors), false},
	{"RowsByID", plain(testRowsByID), false},
	{"ProxyIndexPerTenant", plain(testProxyIndexPerTenant), false},
	{"PurgeSessionLeavesNoByte", testPurgeSessionLeavesNoByte, false},
	{"PurgeCompactedSessionLeavesNoByte", testPurgeCompactedSessionLeavesNoByte, true},
	{"PurgeBranchWithForks", testPurgeBranchWithForks, false},
	{"PurgeSessionsInOneDrop", testPurgeSessionsInOneDrop, false},
}

func plain(fn func(t *testing.T, d DB)) func(t *testing.T, d DB, e Env) {
	return func(t *testing.T, d DB, _ Env) { fn(t, d) }
}

func reopening(fn func(t *testing.T, d DB, reopen func() DB)) func(t *testing.T, d DB, e Env) {
	return func(t *testing.T, d DB, e Env) { fn(t, d, e.Reopen) }
}

// RunDatabase runs every Database conformance test against each engine,
// as subtests named test/engine, on a fresh database each.
func RunDatabase(t *testing.T, engines ...DBEngine) {
	for _, c := range databaseTests {
		t.Run(c.name, func(t *testing.T) {
			for _, e := range engines {
				t.Run(e.Name, func(t *testing.T) {
					if c.compact && e.Compact == nil {
						t.Skip("the engine has no compaction")
					}
					dir := t.TempDir()
					cur := e.Open(t, dir)
					t.Cleanup(func() { cur.Close() })
					env := Env{
						Reopen: func() DB {
							if err := cur.Close(); err != nil {
								t.Fatal(err)
							}
							cur = e.Open(t, dir)
							return cur
						},
						Holding: func(t *testing.T, marker string) []string { return e.Holding(t, dir, marker) },
					}
					if e.Compact != nil {
						env.Compact = func() error { return e.Compact(cur) }
					}
					c.fn(t, cur, env)
				})
			}
		})
	}
}
