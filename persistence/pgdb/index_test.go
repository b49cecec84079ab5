package pgdb

import (
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/pgtest"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// The default tenant's entries are where the index kept them before
// tenants: in ctx_keyed at p|kind|name, Badger's key.
func TestProxyDefaultTenantKey(t *testing.T) {
	d := openPGDB(t, pgtest.Start(t))
	b := messages.NewID[messages.BranchID](time.Now())
	tx := &persistence.Tx{Proxy: []persistence.ProxyEntry{{Kind: persistence.ProxyByKey, Name: []byte("shared-key"),
		ProxyTarget: persistence.ProxyTarget{Branch: b}}}}
	if _, err := d.Commit(bg, tx); err != nil {
		t.Fatal(err)
	}
	got, err := pgGetKeyed[persistence.ProxyTarget](bg, d, "read the default tenant's key", persistence.ErrProxyNotFound, []byte("pkshared-key"))
	if err != nil || got.Branch != b {
		t.Errorf("the default tenant's key at p|k|key = %+v, %v; want its entry", got, err)
	}
}
