package persistence

import (
	"context"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/pgtest"
)

// TestMain stops the PostgreSQL server of the postgres store's tests (if
// one started) and removes its directory before the binary exits.
func TestMain(m *testing.M) { pgtest.Main(m) }

var bg = context.Background()
