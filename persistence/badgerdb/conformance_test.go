package badgerdb_test

import (
	"testing"

	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
	"github.com/contextinfinity/ctxinf/persistence/storetest"
)

// engines are the Store implementations of this package, for the
// conformance kit: Badger's.
func engines() []storetest.Engine {
	return []storetest.Engine{{
		Name:    "badger",
		Durable: true,
		Open: func(t *testing.T, dir string, d persistence.Durability, lim persistence.Limits) persistence.Store {
			t.Helper()
			o := badgerdb.TestOptions(dir)
			o.Durability = d
			o.Limits = lim
			s, err := badgerdb.OpenBadger(o)
			if err != nil {
				t.Fatalf("OpenBadger(%s) = %v", dir, err)
			}
			return s
		},
	}}
}

func TestStore(t *testing.T) { storetest.Run(t, engines()...) }

// TestStoreMatchesModel checks each engine against a naive model. Replay
// a failure with -seed and -run on the failing subtest's name.
func TestStoreMatchesModel(t *testing.T) { storetest.RunModel(t, engines()...) }

// dbEngines are the Database implementations of this package, for the
// conformance kit.
func dbEngines() []storetest.DBEngine {
	return []storetest.DBEngine{{
		Name: "badger",
		Holding: func(t *testing.T, dir, marker string) []string {
			return badgerdb.FilesHolding(t, dir, []byte(marker))
		},
		Compact: func(d storetest.DB) error { return d.(*badgerdb.DB).Compact() },
		Open: func(t *testing.T, dir string) storetest.DB {
			t.Helper()
			d, err := badgerdb.Open(badgerdb.TestOptions(dir))
			if err != nil {
				t.Fatalf("Open(%s) = %v", dir, err)
			}
			return d
		},
	}}
}

func TestDatabase(t *testing.T) { storetest.RunDatabase(t, dbEngines()...) }
