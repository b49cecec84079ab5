package persistence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/pgtest"
	"github.com/contextinfinity/ctxinf/messages"
)

// forEachJournalStore runs fn against the journals as files and as
// PostgreSQL rows.
func forEachJournalStore(t *testing.T, fn func(t *testing.T, js JournalStore)) {
	t.Run("files", func(t *testing.T) { fn(t, FileJournals(filepath.Join(t.TempDir(), "streams"))) })
	t.Run("postgres", func(t *testing.T) { fn(t, openPGDB(t, pgtest.Start(t)).Journals()) })
}

// storedBytes returns the bytes step's journal holds in js.
func storedBytes(t *testing.T, js JournalStore, step messages.StepID) []byte {
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

// Durable counts only the bytes synced, and a reader finds them; Close
// makes every line durable and the journal reads back whole.
func TestJournalStoreDurableAfterSync(t *testing.T) {
	forEachJournalStore(t, func(t *testing.T, js JournalStore) {
		clk := newJournalClock()
		never := time.Hour
		step := newJournalStep(t)
		j, err := NewJournalIn(js, step, "openai", JournalPolicy{FlushInterval: never, FlushBytes: 1 << 20, FsyncInterval: time.Second}, clk.now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := RecoverJournalIn(bg, js, step, nil); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("RecoverJournalIn before the first write = %v, want fs.ErrNotExist", err)
		}
		appendDeltas(t, j, 3)
		if c := j.Counters(); c.Durable != 0 || c.Displayed == 0 {
			t.Fatalf("before the sync: counters %+v, want nothing durable", c)
		}
		clk.t = clk.t.Add(time.Second)
		c, err := j.Tick()
		if err != nil || c.Durable != c.Displayed {
			t.Fatalf("Tick at the fsync interval = %+v, %v; want everything durable", c, err)
		}
		appendDeltas(t, j, 2) // buffered
		r, err := RecoverJournalIn(bg, js, step, nil)
		if err != nil || len(r.Entries) != 3 || r.Torn || r.Valid != c.Durable || r.Size != c.Durable {
			t.Fatalf("RecoverJournalIn after the sync = %d entries, torn %v, valid %d, size %d, %v; want 3, false, %d, %d",
				len(r.Entries), r.Torn, r.Valid, r.Size, err, c.Durable, c.Durable)
		}
		if c := j.Counters(); c.Durable == c.Displayed {
			t.Errorf("after two more appends: counters %+v, want some not durable", c)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		c = j.Counters()
		if c.Durable != c.Displayed {
			t.Errorf("after Close: counters %+v, want Durable == Displayed", c)
		}
		entries, torn, err := ReadJournalIn(bg, js, step, nil)
		if err != nil || torn || len(entries) != 5 {
			t.Fatalf("ReadJournalIn = %d entries, torn %v, %v; want 5", len(entries), torn, err)
		}
		for i, e := range entries {
			if e.Seq != uint64(i+1) || e.Provider != "openai" || string(e.Payload) != fmt.Sprintf(`{"i":%d}`, i%3) {
				t.Errorf("entry %d = %+v (payload %s)", i, e, e.Payload)
			}
		}
		if got := storedBytes(t, js, step); uint64(len(got)) != c.Displayed || !strings.HasPrefix(string(got), `{"ts":"2025-03-01T11:00:00Z","provider":"openai"`) {
			t.Errorf("stored bytes (%d) = %.60q…, want the %d bytes of the JSON lines", len(got), got, c.Displayed)
		}
	})
}

// A torn final line, left by a crash mid-write, is dropped on reading
// back, whichever sync wrote it; the lines before it read.
func TestJournalStoreTornTail(t *testing.T) {
	forEachJournalStore(t, func(t *testing.T, js JournalStore) {
		step := newJournalStep(t)
		s := js.Sink(step)
		if err := s.Create(); err != nil {
			t.Fatal(err)
		}
		whole := journalLineText(1) + journalLineText(2)
		for _, part := range []string{journalLineText(1), journalLineText(2), `{"ts":"2025-03-01T11:0`} {
			if _, err := s.Write([]byte(part)); err != nil {
				t.Fatal(err)
			}
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := RecoverJournalIn(bg, js, step, nil)
		if err != nil || !r.Torn || len(r.Entries) != 2 || r.Valid != uint64(len(whole)) || r.Size != uint64(len(whole)+22) {
			t.Fatalf("RecoverJournalIn = %d entries, torn %v, valid %d, size %d, %v; want 2, true, %d, %d",
				len(r.Entries), r.Torn, r.Valid, r.Size, err, len(whole), len(whole)+22)
		}
	})
}

// An encrypted journal is stored sealed and reads back with its key only.
func TestJournalStoreEncrypted(t *testing.T) {
	const marker = "PANGOLIN-4410"
	forEachJournalStore(t, func(t *testing.T, js JournalStore) {
		c := testCipher(t, testKey(32, 7))
		clk := newJournalClock()
		step := newJournalStep(t)
		j, err := CreateJournalIn(js, step, "local", JournalPolicy{Cipher: c}, clk.now)
		if err != nil {
			t.Fatal(err)
		}
		var want []JournalEntry
		for i := range 3 {
			text := fmt.Sprintf("%s %d", marker, i)
			payload := fmt.Appendf(nil, `{"delta":%q}`, text)
			if _, err := j.AppendText("delta", payload, text); err != nil {
				t.Fatal(err)
			}
			want = append(want, JournalEntry{TS: clk.t.UTC(), Provider: "local", EventType: "delta", Seq: uint64(i + 1), Payload: payload, Text: text})
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if raw := storedBytes(t, js, step); bytes.Contains(raw, []byte(marker)) || raw[0] != sealedLinePrefix {
			t.Errorf("stored bytes %.40q… hold the marker in the clear or are not sealed", raw)
		}
		got, torn, err := ReadJournalIn(bg, js, step, c)
		if err != nil || torn {
			t.Fatalf("ReadJournalIn with the key = torn %v, %v", torn, err)
		}
		sameEntries(t, "read with the key", got, want)
		if _, _, err := ReadJournalIn(bg, js, step, nil); !errors.Is(err, ErrEncrypted) {
			t.Errorf("ReadJournalIn without a key = %v, want ErrEncrypted", err)
		}
		if _, _, err := ReadJournalIn(bg, js, step, testCipher(t, testKey(32, 8))); !errors.Is(err, ErrWrongKey) {
			t.Errorf("ReadJournalIn with another key = %v, want ErrWrongKey", err)
		}
	})
}

// A step's journal is created once; a second creation fails with
// fs.ErrExist (at once for a file, at its first commit for a table) and
// leaves the first alone. A journal closed empty exists, with no entry.
func TestJournalStoreCreate(t *testing.T) {
	forEachJournalStore(t, func(t *testing.T, js JournalStore) {
		clk := newJournalClock()
		step := newJournalStep(t)
		empty, err := CreateJournalIn(js, step, "p", DefaultJournalPolicy(), clk.now)
		if err != nil {
			t.Fatal(err)
		}
		if err := empty.Close(); err != nil {
			t.Fatal(err)
		}
		if r, err := RecoverJournalIn(bg, js, step, nil); err != nil || len(r.Entries) != 0 || r.Size != 0 {
			t.Fatalf("a journal closed empty: %d entries, size %d, %v; want an empty journal", len(r.Entries), r.Size, err)
		}
		again, err := CreateJournalIn(js, step, "p", DefaultJournalPolicy(), clk.now)
		if err == nil {
			appendDeltas(t, again, 1)
			err = again.Close()
		}
		if !errors.Is(err, fs.ErrExist) {
			t.Fatalf("a second journal of the step = %v, want fs.ErrExist", err)
		}
		if b := storedBytes(t, js, step); len(b) != 0 {
			t.Errorf("the first journal changed: %q", b)
		}

		// CloseDeferred without the sync still leaves the lines readable.
		deferred, err := NewJournalIn(js, newJournalStep(t), "p", DefaultJournalPolicy(), clk.now)
		if err != nil {
			t.Fatal(err)
		}
		appendDeltas(t, deferred, 2)
		finish, err := deferred.CloseDeferred(false)
		if err != nil {
			t.Fatal(err)
		}
		if err := finish(); err != nil {
			t.Fatal(err)
		}
		if entries, _, err := ReadJournalIn(bg, js, deferred.step, nil); err != nil || len(entries) != 2 {
			t.Fatalf("after CloseDeferred(false): %d entries, %v; want 2", len(entries), err)
		}
	})
}

// List names every step with a journal, in id order; Remove removes the
// ones asked for, counting those that had one.
func TestJournalStoreListRemove(t *testing.T) {
	forEachJournalStore(t, func(t *testing.T, js JournalStore) {
		if got, err := js.List(bg); err != nil || len(got) != 0 {
			t.Fatalf("List of no journals = %v, %v", got, err)
		}
		now := time.Now()
		var steps []messages.StepID
		for i := range 3 {
			step := messages.NewID[messages.StepID](now.Add(time.Duration(2-i) * time.Second)) // out of order
			j, err := CreateJournalIn(js, step, "p", DefaultJournalPolicy(), nil)
			if err != nil {
				t.Fatal(err)
			}
			appendDeltas(t, j, i) // the first is empty
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			steps = append(steps, step)
		}
		want := slices.SortedFunc(slices.Values(steps), messages.StepID.Compare)
		if got, err := js.List(bg); err != nil || !slices.Equal(got, want) {
			t.Fatalf("List = %v, %v; want %v", got, err, want)
		}
		missing := newJournalStep(t)
		if n, err := js.Remove(bg, []messages.StepID{steps[0], missing, steps[2]}); err != nil || n != 2 {
			t.Fatalf("Remove = %d, %v; want 2", n, err)
		}
		if got, err := js.List(bg); err != nil || !slices.Equal(got, []messages.StepID{steps[1]}) {
			t.Fatalf("List after Remove = %v, %v; want [%v]", got, err, steps[1])
		}
		for _, s := range []messages.StepID{steps[0], steps[2]} {
			if _, err := RecoverJournalIn(bg, js, s, nil); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("RecoverJournalIn of a removed journal = %v, want fs.ErrNotExist", err)
			}
		}
		if entries, _, err := ReadJournalIn(bg, js, steps[1], nil); err != nil || len(entries) != 1 {
			t.Errorf("the journal kept: %d entries, %v; want 1", len(entries), err)
		}
		if n, err := js.Remove(bg, nil); err != nil || n != 0 {
			t.Errorf("Remove(nil) = %d, %v", n, err)
		}
	})
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
	j, err := NewJournalIn(a.Journals(), step, "anthropic", JournalPolicy{FlushInterval: never, FlushBytes: 1 << 20, FsyncInterval: time.Second}, clk.now)
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
	r, err := RecoverJournalIn(bg, b.Journals(), step, nil)
	if err != nil || r.Torn || len(r.Entries) != 3 || r.Valid != durable || r.Size != durable {
		t.Fatalf("RecoverJournalIn on the other member = %d entries, torn %v, valid %d, size %d, %v; want 3, false, %d, %d",
			len(r.Entries), r.Torn, r.Valid, r.Size, err, durable, durable)
	}
	if text := JournalText(r.Entries); text != "w0 w1 w2 " {
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
