package actors

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// A turn's updates count the text streamed (TextDisplayed) and the text
// whose journal records are fsynced (TextDurable), beside the journal's
// bytes. Here the journal writes every record at once and fsyncs none
// before the stream ends: the text stays buffered while it streams and
// is all durable at Done.
func TestUpdateTextCountersWhileFsyncLags(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Journal = persistence.JournalPolicy{FlushInterval: time.Hour, FlushBytes: 1, FsyncInterval: time.Hour}
	const reply = "the durable text lags behind what is shown"
	cfg.Provider = fake.New(fake.Step{Reply: reply})
	r, b := branchOn(t, cfg)
	s, err := r.SubmitWith(bg, b, "hello", SubmitOptions{Key: "text-counters"})
	if err != nil {
		t.Fatal(err)
	}
	var updates []Update
	var last Update
	var text string
	for us := s.Next(nil); us != nil; us = s.Next(nil) {
		for _, u := range us {
			updates = append(updates, u)
			text += u.Delta
			if u.Done {
				last = u
			}
		}
	}
	if text != reply {
		t.Fatalf("streamed %q, want %q", text, reply)
	}
	var shown uint64
	deltas := 0
	for i, u := range updates {
		shown += uint64(len(u.Delta))
		if u.Done {
			continue
		}
		if u.Delta != "" {
			deltas++
		}
		if u.TextDisplayed != shown {
			t.Errorf("update %d (%q): TextDisplayed = %d, want %d (the text so far)", i, u.Delta, u.TextDisplayed, shown)
		}
		if u.TextDurable != 0 {
			t.Errorf("update %d (%q): TextDurable = %d before any fsync, want 0", i, u.Delta, u.TextDurable)
		}
		if u.Delta != "" && u.Displayed <= u.TextDisplayed {
			t.Errorf("update %d: journal bytes %d not above text bytes %d: the journal's framing is not counted",
				i, u.Displayed, u.TextDisplayed)
		}
	}
	if deltas < 5 {
		t.Fatalf("%d deltas, want one per word: %+v", deltas, updates)
	}
	want := uint64(len(reply))
	if !last.Done || last.TextDisplayed != want || last.TextDurable != want {
		t.Fatalf("Done update: text durable/displayed %d/%d, want %d/%d", last.TextDurable, last.TextDisplayed, want, want)
	}
	if last.Durable != last.Displayed || last.Displayed <= want {
		t.Fatalf("Done update: journal durable/displayed %d/%d", last.Durable, last.Displayed)
	}

	// A repeat of the request reads the committed reply, all of its
	// text durable.
	again, err := r.SubmitWith(bg, b, "hello", SubmitOptions{Key: "text-counters"})
	if err != nil {
		t.Fatal(err)
	}
	if text, end := again.Wait(nil); text != reply || end.TextDisplayed != want || end.TextDurable != want {
		t.Fatalf("repeat: %q, text durable/displayed %d/%d, want %q, %d/%d", text, end.TextDurable, end.TextDisplayed, reply, want, want)
	}
}

// The text of the records a journal's fsync covers becomes durable, and
// no more: a journal on a fake clock fsyncs once its interval passed.
func TestJournalTextDurableFollowsFsync(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	step := messages.NewID[messages.StepID](now)
	j, err := persistence.NewJournal(t.TempDir(), step, "fake",
		persistence.JournalPolicy{FlushInterval: time.Hour, FlushBytes: 1 << 20, FsyncInterval: time.Second}, clock)
	if err != nil {
		t.Fatal(err)
	}
	stream := newTurnStream(messages.BranchID{}, messages.TurnID{}, 1)
	base := streamCounters{displayed: 100, durable: 100, textDisplayed: 10, textDurable: 10} // an earlier step's
	ja := &journalActor{j: j, stream: stream, base: base}
	steps := []struct {
		advance            time.Duration
		text               string
		displayed, durable uint64 // text bytes, with the earlier step's
	}{
		{0, "ab", 12, 10},
		{0, "", 12, 10}, // an event without text
		{0, "cde", 15, 10},
		{time.Second, "f", 16, 16}, // the fsync covers every record so far
		{0, "gh", 18, 16},
	}
	for i, st := range steps {
		now = now.Add(st.advance)
		ja.append("fake.delta", []byte(`{}`), st.text)
		us := stream.Next(nil)
		if len(us) != 1 {
			t.Fatalf("step %d: %d updates", i, len(us))
		}
		u := us[0]
		if u.TextDisplayed != st.displayed || u.TextDurable != st.durable {
			t.Errorf("append(%q) at step %d: text durable/displayed %d/%d, want %d/%d",
				st.text, i, u.TextDurable, u.TextDisplayed, st.durable, st.displayed)
		}
		if u.Displayed <= base.displayed || u.Durable < base.durable || u.Durable > u.Displayed {
			t.Errorf("append(%q) at step %d: journal durable/displayed %d/%d", st.text, i, u.Durable, u.Displayed)
		}
	}
	closed := ja.close(closeSynced)
	if c := closed.counters; c.textDisplayed != 8 || c.textDurable != 8 || c.durable != c.displayed {
		t.Fatalf("close: step counters %+v, want text 8/8 and the journal durable", c)
	}
}

// The text counters run over the whole turn: a tool loop's second step
// counts on from the first's, its tool updates carry the counts so far.
func TestUpdateTextCountersOverAToolLoop(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := fake.New(
		fake.Step{Reply: "Looking.", Items: messages.Items{grepCall("a", "x")}, Outcome: pausedForTools},
		fake.Step{Reply: "Found it."},
	)
	r, _, b := toolRuntime(t, f, messages.ToolsEnabled, grepTool(&calls, nil))
	defer r.Close()
	text, last, updates := runTurn(t, r, b, "find x")
	if text != "Looking.Found it." || calls.Load() != 1 {
		t.Fatalf("streamed %q with %d tool calls", text, calls.Load())
	}
	var shown uint64
	items := 0
	for i, u := range updates {
		shown += uint64(len(u.Delta))
		if u.Item != nil {
			items++
		}
		if u.TextDisplayed != shown || u.TextDurable > u.TextDisplayed {
			t.Errorf("update %d (%q, item %v): text durable/displayed %d/%d, want displayed %d",
				i, u.Delta, u.Item != nil, u.TextDurable, u.TextDisplayed, shown)
		}
	}
	if items != 2 {
		t.Errorf("%d tool updates, want the call and its output", items)
	}
	if want := uint64(len(text)); last.TextDisplayed != want || last.TextDurable != want {
		t.Fatalf("Done update: text durable/displayed %d/%d, want %d/%d", last.TextDurable, last.TextDisplayed, want, want)
	}
}
