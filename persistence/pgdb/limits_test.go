package pgdb

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextinfinity/ctxinf/internal/pgtest"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
)

// PGDB's limits are Badger's: the same limit, the same error naming the
// field and store.max_payload_bytes; a limit over what one BYTEA value
// holds is refused at open.
func TestPGDBPayloadLimits(t *testing.T) {
	url := pgtest.Start(t)
	d := openPGDB(t, url) // MaxPayloadBytes 1 MiB
	bo := badgerdb.TestOptions(t.TempDir())
	bo.Limits.MaxPayloadBytes = 1 << 20
	b, err := badgerdb.Open(bo)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	type limited interface {
		MaxPayloadBytes() int64
		CheckPayload(field string, n int) error
	}
	for _, db := range []limited{d, b} {
		if got := db.MaxPayloadBytes(); got != 1<<20 {
			t.Fatalf("%T: MaxPayloadBytes = %d, want %d", db, got, 1<<20)
		}
		if err := db.CheckPayload("message", 1<<20); err != nil {
			t.Fatalf("%T: CheckPayload at the limit: %v", db, err)
		}
		err := db.CheckPayload("message", 1<<20+1)
		if !errors.Is(err, persistence.ErrTooLarge) || !strings.Contains(err.Error(), "message is 1048577 bytes, over the limit of 1048576 (store.max_payload_bytes)") {
			t.Fatalf("%T: CheckPayload over the limit: %v", db, err)
		}
	}
	if d.Cipher() != nil {
		t.Fatal("PGDB has a cipher")
	}
	// The default limit when none is given.
	o := DefaultPGOptions(url)
	o.Limits.MaxPayloadBytes = 0
	d2, err := OpenPostgresDB(bg, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := d2.MaxPayloadBytes(); got != persistence.DefaultMaxPayloadBytes {
		t.Fatalf("default MaxPayloadBytes = %d, want %d", got, persistence.DefaultMaxPayloadBytes)
	}
	d2.Close()
	o.Limits.MaxPayloadBytes = 1 << 30
	if d3, err := OpenPostgresDB(bg, o); err == nil {
		d3.Close()
		t.Fatal("opened with a payload limit of 1 GiB")
	} else if !errors.Is(err, persistence.ErrInvalidArgument) || !strings.Contains(err.Error(), "store.max_payload_bytes") {
		t.Fatalf("open with a payload limit of 1 GiB: %v", err)
	}
}

// A write the server refuses with disk_full (53100; raised here by a
// trigger) fails with a *SpaceError, and new work is refused for
// ServerFullHold after it, until a write commits.
func TestPGDBSpaceDiskFull(t *testing.T) {
	url := pgtest.Start(t)
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	o := DefaultPGOptions(url)
	o.Now = clock
	d, err := OpenPostgresDB(bg, o)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	conn, err := pgx.Connect(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(bg)
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(bg, sql); err != nil {
			t.Fatal(err)
		}
	}
	h, err := d.CreateBranch(bg, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CheckSpace(); err != nil {
		t.Fatalf("CheckSpace before any failure: %v", err)
	}
	exec(`CREATE FUNCTION ctx_test_full() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$`)
	exec(`CREATE TRIGGER ctx_test_full BEFORE INSERT ON ctx_turns FOR EACH ROW EXECUTE FUNCTION ctx_test_full()`)
	_, err = d.Append(bg, h.Branch, persistence.AppendRequest{Payload: []byte("one")})
	var se *persistence.SpaceError
	if !errors.Is(err, persistence.ErrNoSpace) || !errors.As(err, &se) || !strings.Contains(err.Error(), "PostgreSQL server's disk is full") {
		t.Fatalf("append on a full disk: %v", err)
	}
	err = d.CheckSpace()
	if !errors.Is(err, persistence.ErrNoSpace) || !strings.Contains(err.Error(), "reported its disk full") {
		t.Fatalf("CheckSpace after disk_full: %v", err)
	}
	advance(persistence.ServerFullHold)
	if err := d.CheckSpace(); err != nil {
		t.Fatalf("CheckSpace after the hold: %v", err)
	}
	// Full again; a write that commits ends the hold at once.
	if _, err := d.Append(bg, h.Branch, persistence.AppendRequest{Payload: []byte("two")}); !errors.Is(err, persistence.ErrNoSpace) {
		t.Fatalf("append on a full disk: %v", err)
	}
	if err := d.CheckSpace(); !errors.Is(err, persistence.ErrNoSpace) {
		t.Fatalf("CheckSpace after disk_full: %v", err)
	}
	exec(`DROP TRIGGER ctx_test_full ON ctx_turns`)
	if _, err := d.Append(bg, h.Branch, persistence.AppendRequest{Payload: []byte("three")}); err != nil {
		t.Fatal(err)
	}
	if err := d.CheckSpace(); err != nil {
		t.Fatalf("CheckSpace after a commit: %v", err)
	}
}
