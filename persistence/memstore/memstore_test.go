package memstore_test

import (
	"testing"

	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/memstore"
	"github.com/contextinfinity/ctxinf/persistence/storetest"
)

var engine = storetest.Engine{
	Name: "memory",
	Open: func(t *testing.T, dir string, d persistence.Durability, lim persistence.Limits) persistence.Store {
		return memstore.New(lim)
	},
}

func TestStore(t *testing.T) { storetest.Run(t, engine) }

// TestStoreMatchesModel checks the store against a naive model. Replay a
// failure with -seed and -run on the failing subtest's name.
func TestStoreMatchesModel(t *testing.T) { storetest.RunModel(t, engine) }
