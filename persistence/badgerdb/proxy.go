package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/dgraph-io/badger/v4"
)

// proxyTitlesMeta marks a store whose proxy conversations made before the
// index (sessions titled "proxy:<key>") have been entered in it: every
// store opened by a version with the index.
const proxyTitlesMeta = "proxy_keys_from_titles"

// putProxy inserts e unless its name has an entry already (this group's
// or the store's): the first entry stays.
func (g *group) putProxy(e persistence.ProxyEntry) error {
	k := persistence.ProxyEntryKey(e.Tenant, e.Kind, e.Name)
	if ok, err := g.rowExists(k); err != nil || ok {
		return err
	}
	return g.setJSON(k, e.ProxyTarget)
}

// ProxyLookup returns the target of the entry of kind named name in
// tenant's index, or ErrProxyNotFound.
func (d *DB) ProxyLookup(ctx context.Context, tenant string, kind persistence.ProxyKind, name []byte) (persistence.ProxyTarget, error) {
	if err := persistence.CheckTenant(tenant); err != nil {
		return persistence.ProxyTarget{}, err
	}
	return getJSON[persistence.ProxyTarget](d, persistence.ProxyEntryKey(tenant, kind, name), fmt.Errorf("%w: no %c entry %x", persistence.ErrProxyNotFound, byte(kind), name))
}

// ProxyLongestPrefix returns, of hashes (the hashes of a transcript's
// prefixes, shortest first), the index of the last one tenant's index
// holds and its target; -1 if none.
func (d *DB) ProxyLongestPrefix(ctx context.Context, tenant string, hashes [][32]byte) (int, persistence.ProxyTarget, error) {
	if err := persistence.CheckTenant(tenant); err != nil {
		return -1, persistence.ProxyTarget{}, err
	}
	var t persistence.ProxyTarget
	found := -1
	err := d.read(func(txn *badger.Txn) error {
		for i := len(hashes) - 1; i >= 0; i-- {
			item, err := txn.Get(persistence.ProxyEntryKey(tenant, persistence.ProxyByPrefix, hashes[i][:]))
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			found = i
			return item.Value(func(v []byte) error {
				if err := json.Unmarshal(v, &t); err != nil {
					return fmt.Errorf("%w: proxy prefix entry %x: %v", persistence.ErrCorrupt, hashes[i], err)
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return -1, persistence.ProxyTarget{}, err
	}
	return found, t, nil
}

// TurnBranches returns the branches that have a lifecycle row of turn:
// the branch that ran it and the forks that carried it as pending, in
// the order of their ids (the branch that ran it, older, first).
func (d *DB) TurnBranches(ctx context.Context, turn messages.TurnID) ([]messages.BranchID, error) {
	var out []messages.BranchID
	err := d.read(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: id16(tableTurnByID, turn)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if k := it.Item().Key(); len(k) == 33 {
				out = append(out, messages.BranchID(k[17:33]))
			}
		}
		return nil
	})
	return out, err
}

// migrateProxyTitles enters, once per store, the conversations of the
// proxy's versions before the index (a session titled "proxy:<key>"
// was the conversation of key) into the index, as those versions found
// them: the last such session of a key (by id: the newest) is its
// conversation. Its marker (proxyTitlesMeta) is written with the
// entries, so a session titled so later is only a title. A new store
// has no sessions and gets the marker alone.
func (d *DB) migrateProxyTitles() error {
	return d.read(func(txn *badger.Txn) error {
		if ok, err := hasKey(txn, metaKey(proxyTitlesMeta)); err != nil || ok {
			return err
		}
		ss, err := d.Sessions(context.Background())
		if err != nil {
			return err
		}
		byKey := map[string]messages.BranchID{}
		var order []string
		for _, s := range ss {
			k, ok := strings.CutPrefix(s.Title, "proxy:")
			if !ok || k == "" || len(k) > persistence.MaxProxyKey || s.ActiveBranch.IsZero() {
				continue
			}
			if _, seen := byKey[k]; !seen {
				order = append(order, k)
			}
			byKey[k] = s.ActiveBranch
		}
		var entries []entry
		for _, k := range order {
			key := persistence.ProxyEntryKey(persistence.DefaultTenant, persistence.ProxyByKey, []byte(k))
			if ok, err := hasKey(txn, key); err != nil {
				return err
			} else if ok {
				continue // entered by a version with the index: it stays
			}
			v, err := json.Marshal(persistence.ProxyTarget{Branch: byKey[k]})
			if err != nil {
				return err
			}
			entries = append(entries, entry{key: key, val: v})
		}
		start := time.Now()
		entries = append(entries, entry{key: metaKey(proxyTitlesMeta), val: []byte{1}})
		if err := d.writeRaw(entries); err != nil {
			return fmt.Errorf("enter the proxy's conversations by title in its index: %w", err)
		}
		if len(entries) > 1 {
			d.log.Info().Int("conversations", len(entries)-1).Dur("took", time.Since(start)).
				Msg("entered the proxy conversations of sessions titled proxy:<key> in the proxy's index (once)")
		}
		return nil
	})
}

// ClaimProxyKey enters key as the conversation key of branch in
// tenant's index unless it names a conversation there already, and
// returns the conversation it names now: branch's, or the one entered
// first.
func (d *DB) ClaimProxyKey(ctx context.Context, tenant, key string, branch messages.BranchID) (persistence.ProxyTarget, error) {
	e := persistence.ProxyEntry{Tenant: tenant, Kind: persistence.ProxyByKey, Name: []byte(key), ProxyTarget: persistence.ProxyTarget{Branch: branch}}
	if _, err := d.Commit(ctx, &persistence.Tx{Proxy: []persistence.ProxyEntry{e}}); err != nil {
		return persistence.ProxyTarget{}, err
	}
	return d.ProxyLookup(ctx, tenant, persistence.ProxyByKey, e.Name)
}
