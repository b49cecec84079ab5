package actors

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// A crash mid-stream: recovery fails the turn and records its step, with
// the output its journal recovered, labeled incomplete; History shows it
// on the user message, and the head never moves to it.
func TestCrashMidStreamRecordsTheInterruptedStep(t *testing.T) {
	t.Parallel()
	const partial = "a partial answer"
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider = fake.New(fake.Step{Reply: partial, Hang: true}, fake.Step{Reply: "fine"})
	// Every event reaches the file as it is streamed.
	cfg.Journal = persistence.JournalPolicy{FlushInterval: time.Hour, FlushBytes: 1, FsyncInterval: time.Hour}
	r, b := branchOn(t, cfg)
	s, err := r.Submit(bg, b, "tell me")
	if err != nil {
		t.Fatal(err)
	}
	seen := ""
	for seen != partial {
		us := s.Next(nil)
		if us == nil {
			t.Fatalf("the stream ended after %q", seen)
		}
		for _, u := range us {
			seen += u.Delta
		}
	}
	if err := r.kill(bg, b); err != nil { // the provider hangs: the reply is cut off
		t.Fatal(err)
	}
	if _, last := s.Wait(nil); last.Phase != messages.PhaseFailed {
		t.Fatalf("stream of the killed actor ended %+v", last)
	}
	info, err := r.Inspect(bg, b) // the replayed instance, recovered
	if err != nil || info.InFlight != nil || info.Failed != 1 {
		t.Fatalf("after the crash: %+v, %v", info, err)
	}
	rows, err := r.DB().TurnRows(bg, b, 0, 10)
	if err != nil || len(rows) != 1 || rows[0].Phase != messages.PhaseFailed || rows[0].Reason != core.InterruptedReason {
		t.Fatalf("turn rows %+v, %v", rows, err)
	}
	turn := rows[0].ID
	steps, err := r.Steps(bg, turn)
	if err != nil || len(steps) != 1 {
		t.Fatalf("steps of the interrupted turn: %+v, %v; want its step", steps, err)
	}
	st := steps[0]
	if st.ID != rows[0].Step || st.Index != 0 || !st.Interrupted || st.Partial != partial ||
		st.Outcome != (messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: core.InterruptedReason}) ||
		st.Durable == 0 || st.Displayed < st.Durable || st.Provider != "fake" {
		t.Fatalf("step row %+v", st)
	}
	rec, ok, err := r.RecoveredOutput(bg, turn)
	if err != nil || !ok || rec != (Recovered{Turn: turn, Step: st.ID, Text: partial, Displayed: st.Displayed, Durable: st.Durable}) {
		t.Fatalf("RecoveredOutput = %+v, %v, %v", rec, ok, err)
	}
	hist, _, err := r.History(bg, b, messages.TurnID{}, 10)
	if err != nil || len(hist) != 1 || hist[0].Message.Role != messages.RoleUser || hist[0].PartialReply == nil ||
		*hist[0].PartialReply != rec {
		t.Fatalf("history %+v, %v; want the user message carrying the recovered reply", hist, err)
	}
	// The report reads the same, from the row; and on a store whose
	// recovery has not run (no row for the step), from its journal.
	rep, err := BuildReport(bg, r.DB(), cfg.DataDir, 10)
	if err != nil || len(rep.Sessions) != 1 || len(rep.Sessions[0].Branches) != 1 {
		t.Fatalf("report %+v, %v", rep, err)
	}
	if last := rep.Sessions[0].Branches[0].LastTurns; len(last) != 1 || last[0].Partial != rec.Text || last[0].Torn != rec.Torn() {
		t.Fatalf("report's last turns %+v; want the partial output %q", last, rec.Text)
	}
	if got, ok, err := recoveredOutput(bg, nil, r.journals, r.DB().Cipher(), turn, st.ID); err != nil || !ok || got != rec {
		t.Fatalf("recoveredOutput before recovery = %+v, %v, %v; want %+v", got, ok, err, rec)
	}

	// The branch goes on; the partial reply never joins the transcript.
	if _, last, _ := runTurn(t, r, b, "again"); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("next turn ended %+v", last)
	}
	hist, _, err = r.History(bg, b, messages.TurnID{}, 10)
	if err != nil || len(hist) != 3 {
		t.Fatalf("history %+v, %v; want the two user messages and one reply", hist, err)
	}
	if hist[0].PartialReply == nil || hist[1].PartialReply != nil || hist[1].Message.RenderedText != "again" ||
		hist[2].Message.Role != messages.RoleAssistant || hist[2].Message.RenderedText != "fine" {
		t.Fatalf("history %+v", hist)
	}
}

// A crash while a tool loop's second step streams: the loop's turn is
// finalized incomplete with what the loop recorded, and the cut-off step
// gets its row with the output its journal recovered.
func TestCrashMidStreamInToolLoopRecordsTheStep(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := fake.New(fake.Step{Reply: "Checking.", Items: messages.Items{grepCall("a", "x")}, Outcome: pausedForTools},
		fake.Step{Reply: "found it", Hang: true})
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider, cfg.ToolMode = f, messages.ToolsEnabled
	cfg.Journal = persistence.JournalPolicy{FlushInterval: time.Hour, FlushBytes: 1, FsyncInterval: time.Hour}
	reg, err := NewToolRegistry(grepTool(&calls, nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools = reg
	r, b := branchOn(t, cfg)
	s, err := r.Submit(bg, b, "grep x")
	if err != nil {
		t.Fatal(err)
	}
	seen := ""
	for !strings.HasSuffix(seen, "found it") {
		us := s.Next(nil)
		if us == nil {
			t.Fatalf("the stream ended after %q", seen)
		}
		for _, u := range us {
			seen += u.Delta
		}
	}
	if err := r.kill(bg, b); err != nil {
		t.Fatal(err)
	}
	s.Wait(nil)
	if info, err := r.Inspect(bg, b); err != nil || info.InFlight != nil {
		t.Fatalf("after the crash: %+v, %v", info, err)
	}
	rows, _ := r.DB().TurnRows(bg, b, 0, 10)
	if len(rows) != 1 || rows[0].Outcome != "incomplete" {
		t.Fatalf("turn rows %+v", rows)
	}
	steps, err := r.Steps(bg, rows[0].ID)
	if err != nil || len(steps) != 2 || steps[0].Interrupted || !steps[1].Interrupted || steps[1].Index != 1 ||
		steps[1].Partial != "found it" || steps[1].Outcome.Reason != core.InterruptedReason {
		t.Fatalf("steps %+v, %v; want the first as it ended and the second interrupted", steps, err)
	}
	if rec, ok, _ := r.RecoveredOutput(bg, rows[0].ID); !ok || rec.Text != "found it" || rec.Step != steps[1].ID {
		t.Fatalf("RecoveredOutput = %+v, %v", rec, ok)
	}
}
