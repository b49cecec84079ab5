package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"context"
	"fmt"

	"github.com/contextinfinity/ctxinf/messages"
)

// IdempotencyKey returns the row of key in scope and owner, or
// ErrKeyNotFound.
func (d *DB) IdempotencyKey(ctx context.Context, scope persistence.KeyScope, owner messages.BranchID, key string) (persistence.IdempotencyRow, error) {
	if err := scope.Check(); err != nil {
		return persistence.IdempotencyRow{}, err
	}
	if err := persistence.CheckIdempotencyKey(key); err != nil {
		return persistence.IdempotencyRow{}, err
	}
	return getJSON[persistence.IdempotencyRow](d, persistence.IdempotencyRowKey(scope, owner, key), fmt.Errorf("%w %q", persistence.ErrKeyNotFound, key))
}

// putKey inserts idempotency row r; the same row again writes nothing,
// and a key stored for another request or result is ErrDuplicate.
func (g *group) putKey(r persistence.IdempotencyRow) error {
	k := persistence.IdempotencyRowKey(r.Scope, r.Owner, r.Key)
	prev, ok, err := groupRow[persistence.IdempotencyRow](g, k)
	if err != nil {
		return err
	}
	if ok {
		if prev.SameTarget(r) {
			return nil
		}
		return fmt.Errorf("%w: idempotency key %q (scope %c, owner %s) names another request", persistence.ErrDuplicate,
			r.Key, byte(r.Scope), r.Owner)
	}
	return g.setJSON(k, r)
}
