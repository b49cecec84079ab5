package persistence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

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

func journalFileSize(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(st.Size())
}

func journalSumLens(lens []uint64, n int) uint64 {
	var s uint64
	for _, l := range lens[:n] {
		s += l
	}
	return s
}

// journalOp is one step of a policy test: move the clock by advance, then
// Append a payload of size bytes (append) or Tick, and check how many of
// the lines appended so far are on disk and how many are durable.
type journalOp struct {
	advance     time.Duration
	append      int // payload string length; -1 means Tick
	wantOnDisk  int
	wantDurable int
}

const journalTick = -1

// srdPolicy is SRD §13.2's journal policy (config.yaml's stream
// section): flush at least every 250 ms or 8 KiB, fsync at least every
// 2 s.
var srdPolicy = JournalPolicy{FlushInterval: 250 * time.Millisecond, FlushBytes: 8 << 10, FsyncInterval: 2 * time.Second}

func TestJournalPolicy(t *testing.T) {
	never := time.Hour
	tests := []struct {
		name   string
		policy JournalPolicy
		ops    []journalOp
	}{
		{
			name:   "flush by bytes",
			policy: JournalPolicy{FlushInterval: never, FlushBytes: 300, FsyncInterval: never},
			ops: []journalOp{
				{append: 100, wantOnDisk: 0}, // ~200 bytes buffered
				{append: 100, wantOnDisk: 2}, // >= 300: written
				{append: 10, wantOnDisk: 2},  // below the limit again
				{advance: time.Minute, append: journalTick, wantOnDisk: 2},
				{append: 400, wantOnDisk: 4}, // one big line crosses alone
			},
		},
		{
			name:   "flush by time",
			policy: JournalPolicy{FlushInterval: 250 * time.Millisecond, FlushBytes: 1 << 20, FsyncInterval: never},
			ops: []journalOp{
				{advance: 100 * time.Millisecond, append: 10, wantOnDisk: 0},
				{advance: 100 * time.Millisecond, append: journalTick, wantOnDisk: 0},
				{advance: 50 * time.Millisecond, append: journalTick, wantOnDisk: 1}, // 250ms since creation
				{advance: 10 * time.Millisecond, append: 10, wantOnDisk: 1},
				{advance: 239 * time.Millisecond, append: journalTick, wantOnDisk: 1},
				{advance: 1 * time.Millisecond, append: journalTick, wantOnDisk: 2},
				{advance: time.Second, append: journalTick, wantOnDisk: 2}, // idle
				{append: 10, wantOnDisk: 3},                                // long since the last write
			},
		},
		{
			name:   "fsync by time",
			policy: srdPolicy,
			ops: []journalOp{
				{append: 10, wantOnDisk: 0, wantDurable: 0},
				{advance: 250 * time.Millisecond, append: journalTick, wantOnDisk: 1, wantDurable: 0},
				{advance: 1749 * time.Millisecond, append: journalTick, wantOnDisk: 1, wantDurable: 0},
				{advance: 1 * time.Millisecond, append: journalTick, wantOnDisk: 1, wantDurable: 1}, // 2000ms
				{advance: 100 * time.Millisecond, append: 10, wantOnDisk: 2, wantDurable: 1},
				{advance: 1900 * time.Millisecond, append: journalTick, wantOnDisk: 2, wantDurable: 2},
				{advance: 5 * time.Second, append: journalTick, wantOnDisk: 2, wantDurable: 2},
			},
		},
		{
			name:   "fsync due writes the buffer first",
			policy: JournalPolicy{FlushInterval: never, FlushBytes: 1 << 20, FsyncInterval: time.Second},
			ops: []journalOp{
				{append: 10, wantOnDisk: 0, wantDurable: 0},
				{advance: time.Second, append: 10, wantOnDisk: 2, wantDurable: 2},
				{append: 10, wantOnDisk: 2, wantDurable: 2},
				{advance: time.Second, append: journalTick, wantOnDisk: 3, wantDurable: 3},
			},
		},
		{
			name:   "flush by bytes at SRD §13.2's policy",
			policy: srdPolicy,
			ops: []journalOp{
				{append: 9000, wantOnDisk: 1, wantDurable: 0}, // > 8KB
				{append: 10, wantOnDisk: 1, wantDurable: 0},
				{advance: 250 * time.Millisecond, append: journalTick, wantOnDisk: 2, wantDurable: 0},
				{advance: 1750 * time.Millisecond, append: journalTick, wantOnDisk: 2, wantDurable: 2},
			},
		},
		{
			name:   "clock going backwards does not flush",
			policy: srdPolicy,
			ops: []journalOp{
				{advance: -time.Hour, append: 10, wantOnDisk: 0},
				{append: journalTick, wantOnDisk: 0},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newJournalClock()
			j, err := CreateJournal(t.TempDir(), newJournalStep(t), "anthropic", tt.policy, clk.now)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			var lens []uint64
			for i, op := range tt.ops {
				clk.t = clk.t.Add(op.advance)
				before := j.Counters()
				var got JournalCounters
				if op.append == journalTick {
					got, err = j.Tick()
				} else {
					payload := json.RawMessage(`"` + strings.Repeat("x", op.append) + `"`)
					got, err = j.Append("content_block_delta", payload)
					lens = append(lens, got.Displayed-before.Displayed)
				}
				if err != nil {
					t.Fatalf("op %d: %v", i, err)
				}
				if got != j.Counters() {
					t.Fatalf("op %d: returned %+v, Counters() = %+v", i, got, j.Counters())
				}
				want := JournalCounters{Displayed: journalSumLens(lens, len(lens)), Durable: journalSumLens(lens, op.wantDurable)}
				if got != want {
					t.Errorf("op %d: counters = %+v, want %+v", i, got, want)
				}
				if size, want := journalFileSize(t, j.Path()), journalSumLens(lens, op.wantOnDisk); size != want {
					t.Errorf("op %d: file size = %d, want %d (%d of %d lines)", i, size, want, op.wantOnDisk, len(lens))
				}
				if got.Buffered() != (got.Durable < got.Displayed) {
					t.Errorf("op %d: Buffered() = %v for %+v", i, got.Buffered(), got)
				}
			}
		})
	}
}

func TestJournalCloseMakesEverythingDurable(t *testing.T) {
	clk := newJournalClock()
	never := time.Hour
	j, err := CreateJournal(t.TempDir(), newJournalStep(t), "openai", JournalPolicy{FlushInterval: never, FlushBytes: 1 << 20, FsyncInterval: never}, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	appendDeltas(t, j, 5)
	c := j.Counters()
	if c.Durable != 0 || c.Displayed == 0 {
		t.Fatalf("before Close: counters = %+v, want nothing durable", c)
	}
	if err := j.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	c = j.Counters()
	if c.Durable != c.Displayed {
		t.Errorf("after Close: counters = %+v, want Durable == Displayed", c)
	}
	if size := journalFileSize(t, j.Path()); size != c.Displayed {
		t.Errorf("after Close: file size = %d, want %d", size, c.Displayed)
	}
	if err := j.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
	if _, err := j.Append("delta", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close = %v, want ErrClosed", err)
	}
	if _, err := j.Tick(); !errors.Is(err, ErrClosed) {
		t.Errorf("Tick after Close = %v, want ErrClosed", err)
	}
}

func TestJournalRoundTrip(t *testing.T) {
	clk := newJournalClock()
	dir := filepath.Join(t.TempDir(), "streams") // created on demand
	step := newJournalStep(t)
	j, err := CreateJournal(dir, step, "anthropic", srdPolicy, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, step.String()+".jsonl"); j.Path() != want || JournalPath(dir, step) != want {
		t.Fatalf("Path() = %q, JournalPath = %q, want %q", j.Path(), JournalPath(dir, step), want)
	}
	in := []struct {
		eventType   string
		payload     string
		wantPayload string
	}{
		{"message_start", `{"type":"message_start","message":{"id":"msg_1"}}`, ""},
		{"content_block_delta", `{"delta":{"text":"héllo <b>\u2028 \"q\"\n"}}`, ""},
		{"ping", ``, `null`},
		{"", `  {"spaced" : [1, 2]}  `, `{"spaced" : [1, 2]}`},
		{"weird \"type\"\n<&>", "{\n  \"pretty\": [\n    1,\n    2\n  ]\n}", `{"pretty":[1,2]}`},
		{"message_stop", `null`, ""},
	}
	var times []time.Time
	for _, e := range in {
		clk.t = clk.t.Add(1234567 * time.Nanosecond)
		times = append(times, clk.t)
		if _, err := j.Append(e.eventType, json.RawMessage(e.payload)); err != nil {
			t.Fatalf("Append(%q, %q) = %v", e.eventType, e.payload, err)
		}
	}
	// Invalid JSON is refused and takes no seq.
	if _, err := j.Append("bad", json.RawMessage(`{"unterminated"`)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Append(invalid JSON) = %v, want ErrInvalidArgument", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	got, torn, err := ReadJournal(j.Path(), nil)
	if err != nil || torn {
		t.Fatalf("ReadJournal = _, %v, %v, want no tear and no error", torn, err)
	}
	if len(got) != len(in) {
		t.Fatalf("ReadJournal returned %d entries, want %d", len(got), len(in))
	}
	for i, e := range in {
		want := JournalEntry{
			TS:        times[i].UTC(),
			Provider:  "anthropic",
			EventType: e.eventType,
			Seq:       uint64(i + 1),
			Payload:   json.RawMessage(e.payload),
		}
		if e.wantPayload != "" {
			want.Payload = json.RawMessage(e.wantPayload)
		}
		g := got[i]
		if !g.TS.Equal(want.TS) || g.TS.Location() != time.UTC || g.Provider != want.Provider ||
			g.EventType != want.EventType || g.Seq != want.Seq || !bytes.Equal(g.Payload, want.Payload) {
			t.Errorf("entry %d = %+v (payload %s), want %+v (payload %s)", i, g, g.Payload, want, want.Payload)
		}
	}
	// Every line is one JSON object with the SRD §13.1 fields, in UTC.
	data, err := os.ReadFile(j.Path())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != len(in) {
		t.Fatalf("file has %d lines, want %d:\n%s", len(lines), len(in), data)
	}
	if !strings.HasPrefix(lines[0], `{"ts":"2025-03-01T11:00:00.001234567Z","provider":"anthropic","event_type":"message_start","seq":1,"payload":{"type"`) {
		t.Errorf("line 1 = %s", lines[0])
	}
}

// writeTestJournal writes a closed journal of n entries and returns its
// path and bytes.
func writeTestJournal(t testing.TB, dir string, n int) (string, []byte) {
	t.Helper()
	clk := newJournalClock()
	j, err := CreateJournal(dir, newJournalStep(t), "openai", srdPolicy, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		clk.t = clk.t.Add(time.Millisecond)
		if _, err := j.Append("response.output_text.delta", json.RawMessage(fmt.Sprintf(`{"delta":"part %d"}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(j.Path())
	if err != nil {
		t.Fatal(err)
	}
	return j.Path(), data
}

func TestReadJournalTorn(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(data []byte) []byte
		wantN     int
		wantTorn  bool
		wantError bool
	}{
		{"intact", func(d []byte) []byte { return d }, 3, false, false},
		{"half a line appended", func(d []byte) []byte { return append(d, `{"ts":"2025-03-01T11:00:00.004Z","provi`...) }, 3, true, false},
		{"last line lost its newline", func(d []byte) []byte { return d[:len(d)-1] }, 2, true, false},
		{"last line cut in half", func(d []byte) []byte { return d[:len(d)-20] }, 2, true, false},
		{"zero-filled tail", func(d []byte) []byte { return append(d, make([]byte, 100)...) }, 3, true, false},
		{"garbage last line with newline", func(d []byte) []byte { return append(d, "\x00\x00{\n"...) }, 3, true, false},
		{"empty last line", func(d []byte) []byte { return append(d, '\n') }, 3, true, false},
		{"empty file", func(d []byte) []byte { return nil }, 0, false, false},
		{"only a torn line", func(d []byte) []byte { return []byte(`{"ts":`) }, 0, true, false},
		{"valid JSON but not an entry, last", func(d []byte) []byte { return append(d, "[1,2]\n"...) }, 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, data := writeTestJournal(t, t.TempDir(), 3)
			if err := os.WriteFile(path, tt.mutate(slices.Clone(data)), 0o600); err != nil {
				t.Fatal(err)
			}
			got, torn, err := ReadJournal(path, nil)
			if tt.wantError {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("ReadJournal = %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadJournal = %v", err)
			}
			if len(got) != tt.wantN || torn != tt.wantTorn {
				t.Fatalf("ReadJournal = %d entries, torn %v, want %d, %v", len(got), torn, tt.wantN, tt.wantTorn)
			}
			for i, e := range got {
				if e.Seq != uint64(i+1) {
					t.Errorf("entry %d seq = %d, want %d", i, e.Seq, i+1)
				}
			}
		})
	}
}

// journalLineText formats a journal line by hand.
func journalLineText(seq int) string {
	return fmt.Sprintf(`{"ts":"2025-03-01T11:00:00.00%dZ","provider":"p","event_type":"e","seq":%d,"payload":{}}`+"\n", seq%10, seq)
}

func TestReadJournalCorrupt(t *testing.T) {
	l := journalLineText
	tests := []struct {
		name     string
		data     string
		wantLine int
	}{
		{"garbage middle line", l(1) + "not json\n" + l(3), 2},
		{"empty middle line", l(1) + "\n" + l(2), 2},
		{"torn line in the middle", l(1) + `{"ts":"2025` + "\n" + l(2) + l(3), 2},
		{"repeated seq", l(1) + l(2) + l(2), 3},
		{"decreasing seq", l(1) + l(3) + l(2) + l(4), 3},
		{"seq zero", l(0) + l(1), 1},
		{"negative seq", strings.Replace(l(1), `"seq":1`, `"seq":-1`, 1) + l(2), 1},
		{"missing seq", strings.Replace(l(1), `"seq":1,`, ``, 1) + l(2), 1},
		{"missing payload", strings.Replace(l(1), `,"payload":{}`, ``, 1) + l(2), 1},
		{"bad ts", strings.Replace(l(1), `2025-03-01T`, `yesterday `, 1) + l(2), 1},
		{"not an object", l(1) + "[]\n" + l(3), 2},
		{"bad seq on the last line", l(1) + l(2) + l(1), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.jsonl")
			if err := os.WriteFile(path, []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			got, torn, err := ReadJournal(path, nil)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ReadJournal = %d entries, torn %v, %v, want ErrCorrupt", len(got), torn, err)
			}
			if want := fmt.Sprintf("line %d:", tt.wantLine); !strings.Contains(err.Error(), want) {
				t.Errorf("ReadJournal error %q does not name %q", err, want)
			}
		})
	}
}

func TestReadJournalMissing(t *testing.T) {
	_, _, err := ReadJournal(filepath.Join(t.TempDir(), "nope.jsonl"), nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadJournal(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestCreateJournalErrors(t *testing.T) {
	dir := t.TempDir()
	step := newJournalStep(t)
	clk := newJournalClock()
	j, err := CreateJournal(dir, step, "anthropic", srdPolicy, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append("e", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(j.Path())
	if err != nil {
		t.Fatal(err)
	}

	with := func(edit func(*JournalPolicy)) JournalPolicy {
		p := srdPolicy
		edit(&p)
		return p
	}
	tests := []struct {
		name     string
		dir      string
		step     messages.StepID
		provider string
		policy   JournalPolicy
		want     error
	}{
		{"twice", dir, step, "anthropic", srdPolicy, fs.ErrExist},
		{"zero step", dir, messages.StepID{}, "anthropic", srdPolicy, ErrInvalidArgument},
		{"empty dir", "", newJournalStep(t), "anthropic", srdPolicy, ErrInvalidArgument},
		{"empty provider", dir, newJournalStep(t), "", srdPolicy, ErrInvalidArgument},
		{"zero policy", dir, newJournalStep(t), "p", JournalPolicy{}, ErrInvalidArgument},
		{"negative flush interval", dir, newJournalStep(t), "p", with(func(p *JournalPolicy) { p.FlushInterval = -1 }), ErrInvalidArgument},
		{"zero flush bytes", dir, newJournalStep(t), "p", with(func(p *JournalPolicy) { p.FlushBytes = 0 }), ErrInvalidArgument},
		{"negative fsync interval", dir, newJournalStep(t), "p", with(func(p *JournalPolicy) { p.FsyncInterval = -1 }), ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := CreateJournal(tt.dir, tt.step, tt.provider, tt.policy, clk.now)
			if !errors.Is(err, tt.want) {
				if j != nil {
					j.Close()
				}
				t.Fatalf("CreateJournal = %v, want %v", err, tt.want)
			}
		})
	}
	after, err := os.ReadFile(j.Path())
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("existing journal changed by a second CreateJournal: %q -> %q (%v)", before, after, err)
	}
}

func TestListJournals(t *testing.T) {
	base := t.TempDir()
	if got, err := ListJournals(filepath.Join(base, "missing")); err != nil || len(got) != 0 {
		t.Fatalf("ListJournals(missing dir) = %v, %v, want empty", got, err)
	}
	dir := filepath.Join(base, "streams")
	now := time.Now()
	var want []messages.StepID
	for i := range 3 {
		step := messages.NewID[messages.StepID](now.Add(time.Duration(2-i) * time.Second)) // created out of order
		j, err := CreateJournal(dir, step, "p", srdPolicy, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		want = append(want, step)
	}
	slices.SortFunc(want, messages.StepID.Compare)
	other := messages.NewID[messages.StepID](now)
	for _, name := range []string{
		"notes.txt",
		"bad.jsonl",
		strings.ToLower(other.String()) + ".jsonl", // not the canonical name
		other.String() + ".jsonl.tmp",
		other.String(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, messages.NewID[messages.StepID](now).String()+".jsonl"), 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := ListJournals(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("ListJournals = %v, want %v", got, want)
	}
}

// FuzzReadJournal: any bytes either decode to entries with strictly
// increasing seqs and valid JSON payloads, or fail with ErrCorrupt.
func FuzzReadJournal(f *testing.F) {
	dir := f.TempDir()
	for _, n := range []int{0, 1, 3} {
		_, data := writeTestJournal(f, dir, n)
		f.Add(data)
		if len(data) > 0 {
			f.Add(data[:len(data)-1])
			f.Add(data[:len(data)/2])
		}
	}
	f.Add([]byte(journalLineText(1) + "not json\n" + journalLineText(3)))
	f.Add([]byte(journalLineText(1) + journalLineText(1)))
	f.Add([]byte("\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, torn, err := readJournal(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("readJournal(%q) error %v is not ErrCorrupt", data, err)
			}
			return
		}
		var prev uint64
		for i, e := range entries {
			if e.Seq <= prev {
				t.Fatalf("readJournal(%q): entry %d seq %d after %d", data, i, e.Seq, prev)
			}
			prev = e.Seq
			if !json.Valid(e.Payload) {
				t.Fatalf("readJournal(%q): entry %d payload %q is not JSON", data, i, e.Payload)
			}
		}
		if !torn && len(data) > 0 && data[len(data)-1] != '\n' {
			t.Fatalf("readJournal(%q): no trailing newline but torn = false", data)
		}
	})
}

// The text an event displayed is journaled with it, and recovery shows
// exactly that, whatever the payload's shape.
func TestJournalDisplayedText(t *testing.T) {
	clk := newJournalClock()
	j, err := CreateJournal(t.TempDir(), newJournalStep(t), "openai", srdPolicy, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct{ typ, payload, text string }{
		{"chat.completion.chunk", `{"choices":[{"delta":{"content":"Hé"}}]}`, "Hé"},
		{"response.output_text.delta", `{"delta":"llo \"x\"\n"}`, "llo \"x\"\n"},
		{"response.output_text.done", `{"text":"Héllo \"x\"\n"}`, ""}, // shows nothing new
	} {
		if _, err := j.AppendText(e.typ, json.RawMessage(e.payload), e.text); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	entries, _, err := ReadJournal(j.Path(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := JournalText(entries); got != "Héllo \"x\"\n" {
		t.Fatalf("JournalText = %q", got)
	}
}

// NewJournal touches the file system only when it first writes: at the
// policy's first flush, or at Close for a journal that never flushed
// (which still leaves a file, even an empty one). A file already there by
// then is the sticky error CreateJournal would have returned at once.
func TestNewJournalCreatesTheFileAtItsFirstWrite(t *testing.T) {
	clk := newJournalClock()
	never := time.Hour
	policy := JournalPolicy{FlushInterval: never, FlushBytes: 512, FsyncInterval: never}
	dir := filepath.Join(t.TempDir(), "streams") // made when needed
	j := lazyJournal(t, dir, policy, clk.now)
	if exists(j) {
		t.Fatal("NewJournal created the file")
	}
	c, err := j.Append("delta", json.RawMessage(`{"d":"a"}`)) // one short line: buffered
	if err != nil || exists(j) {
		t.Fatalf("after a buffered Append: err %v, file exists %v; want nil, false", err, exists(j))
	}
	if c.Displayed == 0 || c.Durable != 0 {
		t.Fatalf("after a buffered Append: counters %+v, want displayed and nothing durable", c)
	}
	if _, err := j.Append("delta", json.RawMessage(`{"d":"`+strings.Repeat("b", 512)+`"}`)); err != nil || !exists(j) {
		t.Fatalf("after the policy's first flush: err %v, file exists %v; want nil, true", err, exists(j))
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if entries, torn, err := ReadJournal(j.Path(), nil); err != nil || torn || len(entries) != 2 {
		t.Fatalf("ReadJournal = %d entries, torn %v, %v; want 2, false, nil", len(entries), torn, err)
	}

	empty := lazyJournal(t, dir, policy, clk.now)
	if err := empty.Close(); err != nil {
		t.Fatal(err)
	}
	if size := journalFileSize(t, empty.Path()); size != 0 {
		t.Errorf("a journal closed empty: file size %d, want an empty file", size)
	}

	step, taken := journalOverExistingFile(t, dir, policy, clk.now)
	if _, err := taken.Append("delta", json.RawMessage(`{"d":"`+strings.Repeat("c", 512)+`"}`)); !errors.Is(err, fs.ErrExist) {
		t.Errorf("first write over an existing file = %v, want fs.ErrExist", err)
	}
	if _, err := taken.Tick(); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Tick after the failed create = %v, want the same error", err)
	}
	if err := taken.Close(); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Close after the failed create = %v, want the same error", err)
	}
	if data, _ := os.ReadFile(JournalPath(dir, step)); string(data) != "someone else's\n" {
		t.Errorf("the existing file was changed: %q", data)
	}
}

// CloseDeferred ends the journal at once and leaves the file system's
// work to finish: a journal that never wrote has no file until finish
// creates it with every line; one that wrote has the rest appended. The
// journal takes nothing after it, and its counters stay as they were.
func TestJournalCloseDeferred(t *testing.T) {
	clk := newJournalClock()
	never := time.Hour
	policy := JournalPolicy{FlushInterval: never, FlushBytes: 512, FsyncInterval: never}
	dir := filepath.Join(t.TempDir(), "streams") // made by finish
	j := lazyJournal(t, dir, policy, clk.now)
	appendDeltas(t, j, 3)
	before := j.Counters()
	finish, err := j.CloseDeferred(true)
	if err != nil || exists(j) {
		t.Fatalf("CloseDeferred: err %v, file exists %v; want nil, false", err, exists(j))
	}
	if _, err := j.Append("delta", json.RawMessage(`{}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after CloseDeferred = %v, want ErrClosed", err)
	}
	if err := finish(); err != nil {
		t.Fatalf("finish = %v", err)
	}
	if entries, torn, err := ReadJournal(j.Path(), nil); err != nil || torn || len(entries) != 3 {
		t.Fatalf("ReadJournal = %d entries, torn %v, %v; want 3, false, nil", len(entries), torn, err)
	}
	if c := j.Counters(); c != before || c.Durable != 0 {
		t.Errorf("counters after finish %+v, want unchanged %+v", c, before)
	}
	if err := j.Close(); err != nil {
		t.Errorf("Close after CloseDeferred = %v, want nil", err)
	}

	written := lazyJournal(t, dir, policy, clk.now)
	if _, err := written.Append("delta", json.RawMessage(`{"d":"`+strings.Repeat("a", 512)+`"}`)); err != nil || !exists(written) {
		t.Fatalf("first flush: err %v, file exists %v", err, exists(written))
	}
	if _, err := written.Append("delta", json.RawMessage(`{"d":"b"}`)); err != nil {
		t.Fatal(err)
	}
	finish, err = written.CloseDeferred(true)
	if err != nil {
		t.Fatal(err)
	}
	if size := journalFileSize(t, written.Path()); size == written.Counters().Displayed {
		t.Error("CloseDeferred wrote the buffer itself")
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	if size := journalFileSize(t, written.Path()); size != written.Counters().Displayed {
		t.Errorf("after finish: file size %d, want every appended byte (%d)", size, written.Counters().Displayed)
	}

	unsynced := lazyJournal(t, dir, policy, clk.now)
	appendDeltas(t, unsynced, 2)
	if finish, err = unsynced.CloseDeferred(false); err != nil || exists(unsynced) {
		t.Fatalf("CloseDeferred(false): err %v, file exists %v; want nil, false", err, exists(unsynced))
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	if entries, _, err := ReadJournal(unsynced.Path(), nil); err != nil || len(entries) != 2 {
		t.Fatalf("unsynced: ReadJournal = %d entries, %v; want 2", len(entries), err)
	}
	if c := unsynced.Counters(); c.Durable != 0 || journalFileSize(t, unsynced.Path()) != c.Displayed {
		t.Errorf("unsynced: counters %+v, file size %d; want nothing durable and every appended byte written",
			c, journalFileSize(t, unsynced.Path()))
	}

	step, taken := journalOverExistingFile(t, dir, policy, clk.now)
	finish, err = taken.CloseDeferred(true)
	if err != nil {
		t.Fatal(err)
	}
	if err := finish(); !errors.Is(err, fs.ErrExist) {
		t.Errorf("finish over an existing file = %v, want fs.ErrExist", err)
	}
	if data, _ := os.ReadFile(JournalPath(dir, step)); string(data) != "someone else's\n" {
		t.Errorf("the existing file was changed: %q", data)
	}
}

// appendDeltas appends n small delta events to j.
func appendDeltas(t *testing.T, j *Journal, n int) {
	t.Helper()
	for i := range n {
		if _, err := j.Append("delta", json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
}

// journalOverExistingFile returns a new journal in dir whose file someone
// else created first.
func journalOverExistingFile(t *testing.T, dir string, policy JournalPolicy, now func() time.Time) (messages.StepID, *Journal) {
	t.Helper()
	step := newJournalStep(t)
	j, err := NewJournal(dir, step, "local", policy, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(JournalPath(dir, step), []byte("someone else's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return step, j
}

// lazyJournal is NewJournal of a new step in dir: no file yet.
func lazyJournal(t *testing.T, dir string, policy JournalPolicy, now func() time.Time) *Journal {
	t.Helper()
	j, err := NewJournal(dir, newJournalStep(t), "local", policy, now)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// exists reports whether j's file exists.
func exists(j *Journal) bool {
	_, err := os.Stat(j.Path())
	return err == nil
}

// RecoverJournal counts what a crash left: the file's bytes, and those of
// the complete lines it decoded.
func TestRecoverJournalCounts(t *testing.T) {
	l := journalLineText
	tests := []struct {
		name    string
		data    string
		entries int
		valid   int
		torn    bool
	}{
		{"complete", l(1) + l(2), 2, len(l(1) + l(2)), false},
		{"torn tail", l(1) + l(2) + `{"ts":"20`, 2, len(l(1) + l(2)), true},
		{"invalid final line", l(1) + "\x00\x00\n", 1, len(l(1)), true},
		{"empty", "", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.jsonl")
			if err := os.WriteFile(path, []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			j, err := RecoverJournal(path, nil)
			if err != nil || len(j.Entries) != tt.entries || j.Torn != tt.torn || j.Valid != uint64(tt.valid) || j.Size != uint64(len(tt.data)) {
				t.Fatalf("RecoverJournal = %d entries, torn %v, valid %d, size %d, %v; want %d, %v, %d, %d",
					len(j.Entries), j.Torn, j.Valid, j.Size, err, tt.entries, tt.torn, tt.valid, len(tt.data))
			}
		})
	}
}
