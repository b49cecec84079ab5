package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"context"
	"errors"

	"github.com/dgraph-io/badger/v4"

	"github.com/contextinfinity/ctxinf/messages"
)

// Tenants of the context store's own branches, those made through the
// frame protocol rather than the runtime (which have no branch row).
//
// A branch created with BranchSpec.Tenant (not DefaultTenant) has an
// owner row; the root turn its first append makes gets one too, in the
// same commit. Every other turn belongs to the tenant of its root: a
// branch is only ever created at a turn of its own tenant's (callers
// check TurnTenant first) and only its tenant appends to it, so a chain
// never crosses tenants. The runtime's branches belong to their
// session's tenant (SessionRow.Tenant), and so does a root the runtime
// wrote (a session's first user turn, found by its turn row). What has
// no owner row — branches and roots made before tenants, by the Go
// library or by the default tenant — is DefaultTenant's.
const (
	tableBranchTenant byte = 'A' // A | branch(16) → tenant name (a frame-protocol branch of a tenant)
	tableRootTenant   byte = 'Z' // Z | turn(16)   → tenant name (the root turn of such a branch)
)

// ownRoot records, in the group, the tenant of a root turn appended to
// branch: the branch's owner row, if it has one.
func (g *group) ownRoot(branch messages.BranchID, root messages.TurnID) error {
	k := id16(tableBranchTenant, branch)
	v, ok := g.lastEntry(k)
	if !ok {
		item, err := g.txn.Get(k)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if v, err = item.ValueCopy(nil); err != nil {
			return err
		}
	}
	g.setRow(id16(tableRootTenant, root), v)
	return nil
}

// BranchTenant returns the tenant that owns a branch: its session's for
// a branch of the runtime (none, "", while its session is not written:
// an import under way), its owner row's for one made with
// BranchSpec.Tenant, else DefaultTenant. A branch that does not exist is
// the error Head returns for it.
func (d *DB) BranchTenant(ctx context.Context, branch messages.BranchID) (string, error) {
	var tenant string
	err := d.read(func(txn *badger.Txn) error {
		var err error
		tenant, err = branchTenant(txn, branch)
		return err
	})
	return tenant, err
}

func branchTenant(txn *badger.Txn, branch messages.BranchID) (string, error) {
	if _, err := getHead(txn, branch); err != nil {
		return "", err
	}
	row, ok, err := txnRow[persistence.BranchRow](txn, id16(tableBranchRow, branch))
	if err != nil {
		return "", err
	}
	if ok {
		sess, ok, err := txnRow[persistence.SessionRow](txn, id16(tableSession, row.Session))
		if err != nil || !ok {
			return "", err
		}
		return sess.TenantName(), nil
	}
	if t, ok, err := rawRow(txn, id16(tableBranchTenant, branch)); err != nil || ok {
		return t, err
	}
	return persistence.DefaultTenant, nil
}

// TurnTenant returns the tenant that owns a turn: its root's (see
// BranchTenant). A turn that does not exist is the error Turn returns
// for it.
func (d *DB) TurnTenant(ctx context.Context, turn messages.TurnID) (string, error) {
	var tenant string
	err := d.read(func(txn *badger.Txn) error {
		rec, err := d.turnRecord(txn, turn)
		if err != nil {
			return err
		}
		root, err := d.ancestorAt(txn, rec.ID, rec.Depth, 0)
		if err != nil {
			return err
		}
		if t, ok, err := rawRow(txn, id16(tableRootTenant, root)); err != nil || ok {
			tenant = t
			return err
		}
		// A root of the runtime's: its turn rows name its branches. If
		// none of them is left, the root is no one's.
		tenant = persistence.DefaultTenant
		it := txn.NewIterator(badger.IteratorOptions{Prefix: id16(tableTurnByID, root)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if k := it.Item().Key(); len(k) == 33 {
				tenant, err = branchTenant(txn, messages.BranchID(k[17:33]))
				if errors.Is(err, persistence.ErrBranchNotFound) {
					tenant = ""
					continue // a branch deleted since: another may hold it
				}
				return err
			}
		}
		return nil
	})
	return tenant, err
}

// rawRow reads the bytes stored at k as a string.
func rawRow(txn *badger.Txn, k []byte) (string, bool, error) {
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	v, err := item.ValueCopy(nil)
	return string(v), err == nil, err
}
