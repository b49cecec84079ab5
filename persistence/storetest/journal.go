package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// JournalEngine is one JournalStore implementation under test.
type JournalEngine struct {
	Name string
	// Open returns a fresh, empty store.
	Open func(t *testing.T) persistence.JournalStore
}

// journalTests lists the JournalStore conformance tests.
var journalTests = []struct {
	name string
	fn   func(t *testing.T, js persistence.JournalStore)
}{
	{"DurableAfterSync", testJournalStoreDurableAfterSync},
	{"TornTail", testJournalStoreTornTail},
	{"Encrypted", testJournalStoreEncrypted},
	{"Create", testJournalStoreCreate},
	{"ListRemove", testJournalStoreListRemove},
}

// RunJournalStore runs every JournalStore conformance test against each
// engine, as subtests named test/engine.
func RunJournalStore(t *testing.T, engines ...JournalEngine) {
	for _, c := range journalTests {
		t.Run(c.name, func(t *testing.T) {
			for _, e := range engines {
				t.Run(e.Name, func(t *testing.T) { c.fn(t, e.Open(t)) })
			}
		})
	}
}

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

// anyPolicy is a journal policy for the tests that do not depend on
// when a journal writes and syncs.
var anyPolicy = persistence.JournalPolicy{FlushInterval: time.Second, FlushBytes: 4096, FsyncInterval: time.Second}

// policyWith is anyPolicy with the lines sealed by c.
func policyWith(c *persistence.Cipher) persistence.JournalPolicy {
	p := anyPolicy
	p.Cipher = c
	return p
}

// Durable counts only the bytes synced, and a reader finds them; Close
// makes every line durable and the journal reads back whole.
func testJournalStoreDurableAfterSync(t *testing.T, js persistence.JournalStore) {
	clk := newJournalClock()
	never := time.Hour
	step := newJournalStep(t)
	j, err := persistence.NewJournalIn(js, step, "openai", persistence.JournalPolicy{FlushInterval: never, FlushBytes: 1 << 20, FsyncInterval: time.Second}, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := persistence.RecoverJournalIn(bg, js, step, nil); !errors.Is(err, fs.ErrNotExist) {
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
	r, err := persistence.RecoverJournalIn(bg, js, step, nil)
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
	entries, torn, err := persistence.ReadJournalIn(bg, js, step, nil)
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
}

// A torn final line, left by a crash mid-write, is dropped on reading
// back, whichever sync wrote it; the lines before it read.
func testJournalStoreTornTail(t *testing.T, js persistence.JournalStore) {
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
	r, err := persistence.RecoverJournalIn(bg, js, step, nil)
	if err != nil || !r.Torn || len(r.Entries) != 2 || r.Valid != uint64(len(whole)) || r.Size != uint64(len(whole)+22) {
		t.Fatalf("RecoverJournalIn = %d entries, torn %v, valid %d, size %d, %v; want 2, true, %d, %d",
			len(r.Entries), r.Torn, r.Valid, r.Size, err, len(whole), len(whole)+22)
	}
}

// An encrypted journal is stored sealed and reads back with its key only.
func testJournalStoreEncrypted(t *testing.T, js persistence.JournalStore) {
	const marker = "PANGOLIN-4410"
	c := Cipher(t, EncryptionKey(32, 7))
	clk := newJournalClock()
	step := newJournalStep(t)
	j, err := persistence.CreateJournalIn(js, step, "local", policyWith(c), clk.now)
	if err != nil {
		t.Fatal(err)
	}
	var want []persistence.JournalEntry
	for i := range 3 {
		text := fmt.Sprintf("%s %d", marker, i)
		payload := fmt.Appendf(nil, `{"delta":%q}`, text)
		if _, err := j.AppendText("delta", payload, text); err != nil {
			t.Fatal(err)
		}
		want = append(want, persistence.JournalEntry{TS: clk.t.UTC(), Provider: "local", EventType: "delta", Seq: uint64(i + 1), Payload: payload, Text: text})
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if raw := storedBytes(t, js, step); bytes.Contains(raw, []byte(marker)) || raw[0] != '!' { // a sealed line starts with '!'
		t.Errorf("stored bytes %.40q… hold the marker in the clear or are not sealed", raw)
	}
	got, torn, err := persistence.ReadJournalIn(bg, js, step, c)
	if err != nil || torn {
		t.Fatalf("ReadJournalIn with the key = torn %v, %v", torn, err)
	}
	sameEntries(t, "read with the key", got, want)
	if _, _, err := persistence.ReadJournalIn(bg, js, step, nil); !errors.Is(err, persistence.ErrEncrypted) {
		t.Errorf("ReadJournalIn without a key = %v, want ErrEncrypted", err)
	}
	if _, _, err := persistence.ReadJournalIn(bg, js, step, Cipher(t, EncryptionKey(32, 8))); !errors.Is(err, persistence.ErrWrongKey) {
		t.Errorf("ReadJournalIn with another key = %v, want ErrWrongKey", err)
	}
}

// A step's journal is created once; a second creation fails with
// fs.ErrExist (at once for a file, at its first commit for a table) and
// leaves the first alone. A journal closed empty exists, with no entry.
func testJournalStoreCreate(t *testing.T, js persistence.JournalStore) {
	clk := newJournalClock()
	step := newJournalStep(t)
	empty, err := persistence.CreateJournalIn(js, step, "p", anyPolicy, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	if err := empty.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err := persistence.RecoverJournalIn(bg, js, step, nil); err != nil || len(r.Entries) != 0 || r.Size != 0 {
		t.Fatalf("a journal closed empty: %d entries, size %d, %v; want an empty journal", len(r.Entries), r.Size, err)
	}
	again, err := persistence.CreateJournalIn(js, step, "p", anyPolicy, clk.now)
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
	deferredStep := newJournalStep(t)
	deferred, err := persistence.NewJournalIn(js, deferredStep, "p", anyPolicy, clk.now)
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
	if entries, _, err := persistence.ReadJournalIn(bg, js, deferredStep, nil); err != nil || len(entries) != 2 {
		t.Fatalf("after CloseDeferred(false): %d entries, %v; want 2", len(entries), err)
	}
}

// List names every step with a journal, in id order; Remove removes the
// ones asked for, counting those that had one.
func testJournalStoreListRemove(t *testing.T, js persistence.JournalStore) {
	if got, err := js.List(bg); err != nil || len(got) != 0 {
		t.Fatalf("List of no journals = %v, %v", got, err)
	}
	now := time.Now()
	var steps []messages.StepID
	for i := range 3 {
		step := messages.NewID[messages.StepID](now.Add(time.Duration(2-i) * time.Second)) // out of order
		j, err := persistence.CreateJournalIn(js, step, "p", anyPolicy, nil)
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
		if _, err := persistence.RecoverJournalIn(bg, js, s, nil); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("RecoverJournalIn of a removed journal = %v, want fs.ErrNotExist", err)
		}
	}
	if entries, _, err := persistence.ReadJournalIn(bg, js, steps[1], nil); err != nil || len(entries) != 1 {
		t.Errorf("the journal kept: %d entries, %v; want 1", len(entries), err)
	}
	if n, err := js.Remove(bg, nil); err != nil || n != 0 {
		t.Errorf("Remove(nil) = %d, %v", n, err)
	}
}

// journalClock is a fake clock for journal tests; tests move it by hand.
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

// appendDeltas appends n small delta events to j.
func appendDeltas(t *testing.T, j *persistence.Journal, n int) {
	t.Helper()
	for i := range n {
		if _, err := j.Append("delta", json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
}

// journalLineText formats a journal line by hand.
func journalLineText(seq int) string {
	return fmt.Sprintf(`{"ts":"2025-03-01T11:00:00.00%dZ","provider":"p","event_type":"e","seq":%d,"payload":{}}`+"\n", seq%10, seq)
}

// EncryptionKey returns an encryption key of n bytes made from seed, the
// same for the same n and seed: for the tests of encrypted stores and
// journals.
func EncryptionKey(n int, seed byte) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = seed + byte(i)*7
	}
	return k
}

// Cipher is persistence.NewCipher(key), failing t if key is refused.
func Cipher(t testing.TB, key []byte) *persistence.Cipher {
	t.Helper()
	c, err := persistence.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sameEntries(t *testing.T, what string, got, want []persistence.JournalEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !g.TS.Equal(w.TS) || g.Provider != w.Provider || g.EventType != w.EventType || g.Seq != w.Seq ||
			!bytes.Equal(g.Payload, w.Payload) || g.Text != w.Text {
			t.Errorf("%s: entry %d = %+v, want %+v", what, i, g, w)
		}
	}
}
