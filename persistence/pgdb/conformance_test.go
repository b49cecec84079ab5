package pgdb

import (
	"context"
	"sync"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/pgtest"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/storetest"
)

// engine is the PostgreSQL Store for the conformance kit. PostgreSQL
// commits durably whatever the durability asked; dir names the database,
// so that a reopen finds the same one.
func engine() storetest.Engine {
	return storetest.Engine{
		Name:    "postgres",
		Durable: true,
		OneRun:  true,
		Open: func(t *testing.T, dir string, d persistence.Durability, lim persistence.Limits) persistence.Store {
			t.Helper()
			o := DefaultPGOptions(databaseOf(t, dir))
			o.Limits = lim
			s, err := OpenPostgres(context.Background(), o)
			if err != nil {
				t.Fatalf("OpenPostgres = %v", err)
			}
			return s
		},
	}
}

// databases maps a store's directory to its database's URL.
var databases sync.Map

// databaseOf returns the URL of dir's database, starting one for a new
// dir.
func databaseOf(t *testing.T, dir string) string {
	url, _ := databases.Load(dir)
	if url == nil {
		url = pgtest.Start(t)
		databases.Store(dir, url)
	}
	return url.(string)
}

func TestStore(t *testing.T) { storetest.Run(t, engine()) }

// TestStoreMatchesModel checks the store against a naive model. Replay a
// failure with -seed and -run on the failing subtest's name.
func TestStoreMatchesModel(t *testing.T) { storetest.RunModel(t, engine()) }

// TestDatabase runs the Database conformance tests on PGDB, its paged
// reads (EachTurnRow, BranchChunkVectors, Events) reading 3 rows a query,
// so that their paging is tested on rows of several pages.
func TestDatabase(t *testing.T) {
	page := pgEachPage
	pgEachPage = 3
	t.Cleanup(func() { pgEachPage = page })
	storetest.RunDatabase(t, storetest.DBEngine{
		Name: "postgres",
		Holding: func(t *testing.T, dir, marker string) []string {
			return tablesHolding(t, databaseOf(t, dir), []byte(marker))
		},
		Open: func(t *testing.T, dir string) storetest.DB {
			t.Helper()
			o := DefaultPGOptions(databaseOf(t, dir))
			o.Limits.MaxPayloadBytes = 1 << 20
			d, err := OpenPostgresDB(context.Background(), o)
			if err != nil {
				t.Fatalf("OpenPostgresDB = %v", err)
			}
			return d
		},
	})
}

// TestJournalStore runs the journal store's conformance tests on the
// journals as PostgreSQL rows.
func TestJournalStore(t *testing.T) {
	storetest.RunJournalStore(t, storetest.JournalEngine{
		Name: "postgres",
		Open: func(t *testing.T) persistence.JournalStore {
			o := DefaultPGOptions(pgtest.Start(t))
			o.Limits.MaxPayloadBytes = 1 << 20
			d, err := OpenPostgresDB(context.Background(), o)
			if err != nil {
				t.Fatalf("OpenPostgresDB = %v", err)
			}
			t.Cleanup(func() { d.Close() })
			return d.Journals()
		},
	})
}
