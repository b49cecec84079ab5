package pgdb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/pgtest"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// storedBytes returns the bytes step's journal holds in js.
func storedBytes(t *testing.T, js persistence.JournalStore, step messages.StepID) []byte {
	t.Helper()
	r, err := js.Open(bg, step)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// journalClock is a journal's clock that moves only when a test moves it.
type journalClock struct{ t time.Time }

func (c *journalClock) now() time.Time { return c.t }

func newJournalClock() *journalClock {
	// Not UTC on purpose: the journal must write UTC.
	return &journalClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.FixedZone("X", 3600))}
}

func newJournalStep(t testing.TB) messages.StepID {
	t.Helper()
	return messages.NewID[messages.StepID](time.Now())
}

func journalLineText(seq int) string {
	return fmt.Sprintf(`{"ts":"2025-03-01T11:00:00.00%dZ","provider":"p","event_type":"e","seq":%d,"payload":{}}`+"\n", seq%10, seq)
}

// A member that dies mid-stream leaves in the database what its journal
// had synced: another member, on its own connection, recovers it, with
// the counters the dead member last showed as durable.
func TestPGJournalRecoveredByAnotherMember(t *testing.T) {
	url := pgtest.Start(t)
	a, b := openPGDB(t, url), openPGDB(t, url)
	clk := newJournalClock()
	never := time.Hour
	step := newJournalStep(t)
	j, err := persistence.NewJournalIn(a.Journals(), step, "anthropic", persistence.JournalPolicy{FlushInterval: never, FlushBytes: 1 << 20, FsyncInterval: time.Second}, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := j.AppendText("delta", json.RawMessage(fmt.Sprintf(`{"d":"w%d "}`, i)), fmt.Sprintf("w%d ", i)); err != nil {
			t.Fatal(err)
		}
		if i == 1 || i == 2 {
			clk.t = clk.t.Add(time.Second) // a sync after the 2nd and the 3rd
			if _, err := j.Tick(); err != nil {
				t.Fatal(err)
			}
		}
	}
	durable := j.Counters().Durable
	// a dies: its journal is never closed, the 4th line never synced.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Journals().List(bg); err != nil || !slices.Equal(got, []messages.StepID{step}) {
		t.Fatalf("List on the other member = %v, %v", got, err)
	}
	r, err := persistence.RecoverJournalIn(bg, b.Journals(), step, nil)
	if err != nil || r.Torn || len(r.Entries) != 3 || r.Valid != durable || r.Size != durable {
		t.Fatalf("RecoverJournalIn on the other member = %d entries, torn %v, valid %d, size %d, %v; want 3, false, %d, %d",
			len(r.Entries), r.Torn, r.Valid, r.Size, err, durable, durable)
	}
	if text := persistence.JournalText(r.Entries); text != "w0 w1 w2 " {
		t.Errorf("recovered text %q, want %q", text, "w0 w1 w2 ")
	}
	if n, err := b.Journals().Remove(bg, []messages.StepID{step}); err != nil || n != 1 {
		t.Fatalf("Remove on the other member = %d, %v", n, err)
	}
	var rows int
	if err := b.pool.QueryRow(bg, `SELECT count(*) FROM ctx_journals`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("rows of ctx_journals after Remove = %d, %v; want none", rows, err)
	}
}

// A commit whose answer was lost may be in: the retry that finds a row
// at its offset takes it for its own only if the bytes are its own, so a
// range is stored once and another writer's row is never taken.
func TestPGJournalRetryIsIdempotent(t *testing.T) {
	d := openPGDB(t, pgtest.Start(t))
	step := newJournalStep(t)
	first := d.Journals().Sink(step).(*pgJournalSink)
	if err := first.Create(); err != nil {
		t.Fatal(err)
	}
	line := []byte(journalLineText(1))
	first.Write(line)
	if err := first.Sync(); err != nil {
		t.Fatal(err)
	}
	retry := &pgJournalSink{s: d.pgStore, step: step, created: true, pending: line}
	if err := retry.taken(bg, true); err != nil {
		t.Errorf("a lost commit's own row: %v, want it taken as committed", err)
	}
	if err := retry.taken(bg, false); !errors.Is(err, fs.ErrExist) {
		t.Errorf("a row at offset 0 with no commit lost: %v, want fs.ErrExist", err)
	}
	other := &pgJournalSink{s: d.pgStore, step: step, created: true, pending: []byte(journalLineText(2))}
	if err := other.taken(bg, true); !errors.Is(err, fs.ErrExist) {
		t.Errorf("another writer's row at offset 0: %v, want fs.ErrExist", err)
	}
	if err := other.Sync(); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Sync over another writer's row = %v, want fs.ErrExist", err)
	}
	if got := storedBytes(t, d.Journals(), step); !bytes.Equal(got, line) {
		t.Errorf("stored %q, want the first writer's %q", got, line)
	}
}
