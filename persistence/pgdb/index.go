package pgdb

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// The idempotency keys and the proxy index of PGDB. Both are rows written
// once under a name and never changed, so they share one table,
// ctx_keyed, whose key is the row's Badger key (idemKey, proxyKey) and
// whose data is the bytes Badger stores there (an IdempotencyRow's or a
// ProxyTarget's JSON): the scopes, owners and tenants keep the rows apart
// exactly as they do in Badger.

// prefetchKeyed queues, with add, the reads of the keyed rows tx writes.
func (r *pgExtraReads) prefetchKeyed(tx *persistence.Tx, add func(what string, set func([]byte) error, sql string, args ...any)) {
	read := func(k []byte, what string) {
		if _, ok := r.keyed[string(k)]; ok {
			return
		}
		r.keyed[string(k)] = pgDoc{}
		add(what, func(v []byte) error {
			r.keyed[string(k)] = pgDoc{ok: true, data: v}
			return nil
		}, `SELECT data FROM ctx_keyed WHERE key = $1`, k)
	}
	for _, k := range tx.Keys {
		read(persistence.IdempotencyRowKey(k.Scope, k.Owner, k.Key), fmt.Sprintf("idempotency key %q", k.Key))
	}
	for _, e := range tx.Proxy {
		read(persistence.ProxyEntryKey(e.Tenant, e.Kind, e.Name), fmt.Sprintf("proxy entry %c %x", byte(e.Kind), e.Name))
	}
}

// keyedAt is the keyed row a Tx finds at k: its own, the group's, the
// stored.
func (g *pgGroup) keyedAt(rows *pgRows, own *pgExtra, k []byte) (pgDoc, error) {
	for _, x := range []*pgExtra{own, &rows.x} {
		if v, ok := x.keyed[string(k)]; ok {
			return pgDoc{ok: true, data: v}, nil
		}
	}
	if d, ok := rows.xr.keyed[string(k)]; ok {
		return d, nil
	}
	rows.xr.keyed[string(k)] = pgDoc{}
	err := g.readOne(func(v []byte) error {
		rows.xr.keyed[string(k)] = pgDoc{ok: true, data: v}
		return nil
	}, `SELECT data FROM ctx_keyed WHERE key = $1`, k)
	return rows.xr.keyed[string(k)], err
}

// applyKeyed applies tx's idempotency keys (putKey) and proxy entries
// (putProxy), in that order, as applyTx does after the events.
func (g *pgGroup) applyKeyed(tx *persistence.Tx, rows *pgRows, own *pgExtra) error {
	for i, r := range tx.Keys {
		k := persistence.IdempotencyRowKey(r.Scope, r.Owner, r.Key)
		prev, err := g.keyedAt(rows, own, k)
		if err != nil {
			return fmt.Errorf("key %d: %w", i, err)
		}
		if prev.ok {
			var p persistence.IdempotencyRow
			if err := json.Unmarshal(prev.data, &p); err != nil {
				return fmt.Errorf("key %d: %w: idempotency key %q: %v", i, persistence.ErrCorrupt, r.Key, err)
			}
			if p.SameTarget(r) {
				continue
			}
			return fmt.Errorf("key %d: %w: idempotency key %q (scope %c, owner %s) names another request", i, persistence.ErrDuplicate,
				r.Key, byte(r.Scope), r.Owner)
		}
		b, err := encodeJSONRow(r)
		if err != nil {
			return fmt.Errorf("key %d: %w", i, err)
		}
		own.keyed[string(k)] = b
	}
	for i, e := range tx.Proxy {
		k := persistence.ProxyEntryKey(e.Tenant, e.Kind, e.Name)
		prev, err := g.keyedAt(rows, own, k)
		if err != nil {
			return fmt.Errorf("proxy entry %d: %w", i, err)
		}
		if prev.ok {
			continue // the first entry stays
		}
		b, err := encodeJSONRow(e.ProxyTarget)
		if err != nil {
			return fmt.Errorf("proxy entry %d: %w", i, err)
		}
		own.keyed[string(k)] = b
	}
	return nil
}

// queueKeyed adds x's keyed rows to b, in key order. Each was read free,
// so each is a plain insert: another runtime's insert there meanwhile
// fails the transaction (23505 or 40001), and the retry reads it.
func (x *pgExtra) queueKeyed(b *pgx.Batch, checks []pgCheck) []pgCheck {
	ks := make([]string, 0, len(x.keyed))
	for k := range x.keyed {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for _, k := range ks {
		b.Queue(`INSERT INTO ctx_keyed (key, data) VALUES ($1, $2)`, []byte(k), x.keyed[k])
		checks = append(checks, pgCheck{fmt.Sprintf("insert keyed row %x", k), false})
	}
	return checks
}

// pgGetKeyed reads the keyed row at k into a T; notFound when there is
// none.
func pgGetKeyed[T any](ctx context.Context, d *PGDB, what string, notFound error, k []byte) (T, error) {
	return pgGetRow[T](ctx, d, what, notFound, `SELECT data FROM ctx_keyed WHERE key = $1`, k)
}

// IdempotencyKey returns the row of key in scope and owner, or
// ErrKeyNotFound.
func (d *PGDB) IdempotencyKey(ctx context.Context, scope persistence.KeyScope, owner messages.BranchID, key string) (persistence.IdempotencyRow, error) {
	if err := scope.Check(); err != nil {
		return persistence.IdempotencyRow{}, err
	}
	if err := persistence.CheckIdempotencyKey(key); err != nil {
		return persistence.IdempotencyRow{}, err
	}
	return pgGetKeyed[persistence.IdempotencyRow](ctx, d, fmt.Sprintf("read idempotency key %q", key),
		fmt.Errorf("%w %q", persistence.ErrKeyNotFound, key), persistence.IdempotencyRowKey(scope, owner, key))
}

// ProxyLookup returns the target of the entry of kind named name in
// tenant's index, or ErrProxyNotFound.
func (d *PGDB) ProxyLookup(ctx context.Context, tenant string, kind persistence.ProxyKind, name []byte) (persistence.ProxyTarget, error) {
	if err := persistence.CheckTenant(tenant); err != nil {
		return persistence.ProxyTarget{}, err
	}
	return pgGetKeyed[persistence.ProxyTarget](ctx, d, fmt.Sprintf("read proxy entry %c %x", byte(kind), name),
		fmt.Errorf("%w: no %c entry %x", persistence.ErrProxyNotFound, byte(kind), name), persistence.ProxyEntryKey(tenant, kind, name))
}

// ProxyLongestPrefix returns, of hashes (the hashes of a transcript's
// prefixes, shortest first), the index of the last one tenant's index
// holds and its target; -1 if none. It reads them in one query (one
// snapshot, as Badger's one read transaction).
func (d *PGDB) ProxyLongestPrefix(ctx context.Context, tenant string, hashes [][32]byte) (int, persistence.ProxyTarget, error) {
	if err := persistence.CheckTenant(tenant); err != nil {
		return -1, persistence.ProxyTarget{}, err
	}
	if len(hashes) == 0 {
		return -1, persistence.ProxyTarget{}, nil
	}
	if err := d.alive(); err != nil {
		return -1, persistence.ProxyTarget{}, err
	}
	keys := make([][]byte, len(hashes))
	at := make(map[string]int, len(hashes))
	for i, h := range hashes {
		keys[i] = persistence.ProxyEntryKey(tenant, persistence.ProxyByPrefix, h[:])
		at[string(keys[i])] = i // the last of equal hashes
	}
	const what = "read proxy prefixes"
	rows, err := d.pool.Query(ctx, `SELECT key, data FROM ctx_keyed WHERE key = ANY($1)`, keys)
	if err != nil {
		return -1, persistence.ProxyTarget{}, d.readErr(what, err)
	}
	defer rows.Close()
	found := -1
	var data []byte
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return -1, persistence.ProxyTarget{}, d.readErr(what, err)
		}
		if i, ok := at[string(k)]; ok && i > found {
			found, data = i, v
		}
	}
	if err := rows.Err(); err != nil {
		return -1, persistence.ProxyTarget{}, d.readErr(what, err)
	}
	var t persistence.ProxyTarget
	if found >= 0 {
		if err := json.Unmarshal(data, &t); err != nil {
			return -1, persistence.ProxyTarget{}, fmt.Errorf("%w: proxy prefix entry %x: %v", persistence.ErrCorrupt, hashes[found], err)
		}
	}
	return found, t, nil
}

// ClaimProxyKey enters key as the conversation key of branch in
// tenant's index unless it names a conversation there already, and
// returns the conversation it names now: branch's, or the one entered
// first. Of runtimes racing to claim one key, the one whose transaction
// commits first enters it; the others' inserts fail, they retry, find it
// and keep it.
func (d *PGDB) ClaimProxyKey(ctx context.Context, tenant, key string, branch messages.BranchID) (persistence.ProxyTarget, error) {
	e := persistence.ProxyEntry{Tenant: tenant, Kind: persistence.ProxyByKey, Name: []byte(key), ProxyTarget: persistence.ProxyTarget{Branch: branch}}
	if _, err := d.Commit(ctx, &persistence.Tx{Proxy: []persistence.ProxyEntry{e}}); err != nil {
		return persistence.ProxyTarget{}, err
	}
	return d.ProxyLookup(ctx, tenant, persistence.ProxyByKey, e.Name)
}
