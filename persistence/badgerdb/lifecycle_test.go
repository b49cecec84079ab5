package badgerdb

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/storetest"
)

func openDB(t *testing.T) *DB {
	t.Helper()
	d, err := Open(TestOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestRowsByID(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	check, r := storetest.WriteRowsByID(t, d)
	check(d)
	ids, other, b1, b2, fork, steps := r.Turns, r.Other, r.B1, r.B2, r.Fork, r.Steps

	// A store written before the index: its rows are indexed at Open, in
	// batches, and once.
	del := []entry{{key: metaKey(turnIndexMeta), del: true}, {key: turnByIDKey(other, b2), del: true},
		{key: metaKey(stepIndexMeta), del: true}}
	for _, id := range ids {
		del = append(del, entry{key: turnByIDKey(id, b1), del: true})
	}
	del = append(del, entry{key: turnByIDKey(ids[3], fork), del: true})
	for _, st := range steps {
		del = append(del, entry{key: id16(tableStepByID, st.ID), del: true})
	}
	if err := d.writeRaw(del); err != nil {
		t.Fatal(err)
	}
	if _, err := d.TurnRow(bg, b1, ids[0]); !errors.Is(err, persistence.ErrNodeNotFound) {
		t.Fatalf("without its index entry: err = %v, want ErrNodeNotFound", err)
	}
	if _, err := d.StepRow(bg, steps[0].ID); !errors.Is(err, persistence.ErrRowNotFound) {
		t.Fatalf("without its index entry: err = %v, want ErrRowNotFound", err)
	}
	d.Close()
	defer func(n int) { indexBatch = n }(indexBatch)
	indexBatch = 7
	d, err = Open(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	if g := d.Stats().Groups; g != 4+1 {
		t.Fatalf("indexing 26 turn rows and 2 step rows 7 at a time took %d group commits, want 5", g)
	}
	check(d)
	d.Close()
	d, err = Open(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if g := d.Stats().Groups; g != 0 {
		t.Fatalf("an indexed store's Open wrote %d groups, want 0", g)
	}
	check(d)
}

// A step row written before the prompt cache's usage was kept decodes
// with none.
func TestStepRowWithoutCacheUsage(t *testing.T) {
	t.Parallel()
	old := `{"id":"01JD8Z3QZJ6Y7W3V9Q4N2K5M8P","branch":"01JD8Z3QZJ6Y7W3V9Q4N2K5M8Q","turn":"01JD8Z3QZJ6Y7W3V9Q4N2K5M8R","index":0,` +
		`"provider":"anthropic","model":"m","outcome":{"kind":"completed"},"displayed":3,"durable":3,` +
		`"input_tokens":1200,"output_tokens":40,"started":"2024-11-20T10:00:00Z","ended":"2024-11-20T10:00:01Z"}`
	var r persistence.StepRow
	if err := json.Unmarshal([]byte(old), &r); err != nil {
		t.Fatal(err)
	}
	if r.InputTokens != 1200 || r.OutputTokens != 40 || r.CacheReadTokens != 0 || r.CacheWriteTokens != 0 {
		t.Errorf("old row read as %d in (%d cached, %d written), %d out", r.InputTokens, r.CacheReadTokens, r.CacheWriteTokens, r.OutputTokens)
	}
}

// A store written before the index of sessions by tenant: Open indexes
// its session rows, once, and its tenants' pages list them.
func TestTenantSessionIndexBackfill(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_700_000_000_000)
	tx := &persistence.Tx{}
	del := []entry{{key: metaKey(tenantIndexMeta), del: true}}
	for i := range 9 {
		r := persistence.SessionRow{ID: messages.NewID[messages.SessionID](now), Tenant: []string{"", "acme", "other"}[i%3], Created: now}
		tx.Sessions = append(tx.Sessions, r)
		del = append(del, entry{key: tenantSessionKey(r), del: true})
	}
	if _, err := d.Commit(bg, tx); err != nil {
		t.Fatal(err)
	}
	if err := d.writeRaw(del); err != nil {
		t.Fatal(err)
	}
	if rows, err := d.SessionPage(bg, persistence.SessionQuery{Tenant: "acme", Limit: 10}); err != nil || len(rows) != 0 {
		t.Fatalf("without the index: SessionPage = %d rows, %v; want none", len(rows), err)
	}
	d.Close()
	for range 2 {
		if d, err = Open(TestOptions(dir)); err != nil {
			t.Fatal(err)
		}
		for _, tenant := range []string{"", "acme", "other"} {
			rows, err := d.SessionPage(bg, persistence.SessionQuery{Tenant: tenant, Limit: 10})
			if err != nil || len(rows) != 3 {
				t.Fatalf("SessionPage(%q) = %d rows, %v; want 3", tenant, len(rows), err)
			}
		}
		d.Close()
	}
}

// A store whose tables were written zstd-compressed (the setting before
// S2) reads them after it opens with S2, beside the tables it writes
// then: each table records its own compression.
func TestTableCompressionChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := TestOptions(dir)
	opts.TableCompression = persistence.CompressZstd
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := storetest.WriteRowsByID(t, d)
	d.Close() // the memtables go into tables
	ssts, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil || len(ssts) == 0 {
		t.Fatalf("tables after close: %v, %v; want some", ssts, err)
	}
	opts.TableCompression = persistence.CompressS2
	if d, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	before(d)
	after, _ := storetest.WriteRowsByID(t, d)
	d.Close()
	if d, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	before(d)
	after(d)
}
