package actors

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
)

// Every stamp the runtime writes comes from Config.Now: with a clock
// stopped at one instant, the session's row, a turn's ids, its row, its
// step's row and the state that folds it all carry that instant,
// and the timers still run (the turn is folded and indexed).
func TestStampsComeFromTheClock(t *testing.T) {
	t.Parallel()
	at := time.Date(2031, 2, 3, 4, 5, 6, 7e6, time.UTC) // ids hold milliseconds
	clock := &fakeClock{now: at}
	ev := newEvents()
	cfg := testConfig(t, t.TempDir(), ev)
	cfg.Now = clock.Now
	cfg.Fold = &core.Policy{} // fold every turn once it is finalized
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, err := r.CreateSession(bg, "clock")
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Submit(bg, b.ID, "what time is it")
	if err != nil {
		t.Fatal(err)
	}
	if _, last, _ := drain(t, s); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("turn ended %+v", last)
	}
	ev.waitFor(t, "TurnIndexed", 1, isType[messages.TurnIndexed])
	if _, err := r.Inspect(bg, b.ID); err != nil { // commits the held index results
		t.Fatal(err)
	}
	same := func(what string, got time.Time) {
		t.Helper()
		if !got.Equal(at) {
			t.Errorf("%s = %v, want the clock's %v", what, got, at)
		}
	}
	same("turn id's time", s.Turn.Time())
	row, err := r.DB().TurnRow(bg, b.ID, s.Turn)
	if err != nil {
		t.Fatal(err)
	}
	if row.Phase != messages.PhaseDone {
		t.Fatalf("turn row phase %s, want done", row.Phase)
	}
	same("turn row's Updated", row.Updated)
	same("reply id's time", row.Reply.Time())
	same("step id's time", row.Step.Time())
	step, err := r.DB().StepRow(bg, row.Step)
	if err != nil {
		t.Fatal(err)
	}
	same("step row's Started", step.Started)
	same("step row's Ended", step.Ended)
	states, err := r.DB().StateRows(bg, b.ID, 1, 10)
	if err != nil || len(states) == 0 {
		t.Fatalf("state rows: %v, %v", states, err)
	}
	same("state row's Created", states[0].Created)
	same("state id's time", states[0].ID.Time())
	sess, err := r.DB().Session(bg, b.Session)
	if err != nil {
		t.Fatal(err)
	}
	same("session's Created", sess.Created)
}

// A stopped branch's retry time is the clock's: its error names it, and
// it is activated again once the clock passes it.
func TestStoppedBranchWaitsForTheClock(t *testing.T) {
	t.Parallel()
	at := time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)
	clock := &fakeClock{now: at}
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Now = clock.Now
	r := openRuntime(t, cfg)
	defer r.Close()
	id := messages.NewID[messages.BranchID](at)
	r.branchStopped(&actor.PID{Id: "ctxinf/" + branchName(id)}, errors.New("failed in a test"))
	err := r.stoppedErr(id)
	if err == nil {
		t.Fatal("stoppedErr = nil right after the stop")
	}
	if want := at.Add(stopBackoff).Format(time.RFC3339); !strings.Contains(err.Error(), want) {
		t.Errorf("stoppedErr = %q, want it to name the retry time %s", err, want)
	}
	clock.Add(stopBackoff)
	if err := r.stoppedErr(id); err != nil {
		t.Errorf("stoppedErr after the backoff = %v, want nil", err)
	}
}

// TestClockReadsInOneFile keeps the machine's clock read in clock.go
// alone: elsewhere, a stamp comes from Config.Now and a span from a
// mark.
func TestClockReadsInOneFile(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files: %v", err)
	}
	for _, file := range files {
		if file == "clock.go" || strings.HasSuffix(file, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "time" {
				switch sel.Sel.Name {
				case "Now", "Since", "Until":
					t.Errorf("%s: time.%s(): read Config.Now for a stamp, or a mark (clock.go) for a span", fset.Position(call.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
}
