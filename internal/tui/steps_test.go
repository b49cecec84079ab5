package tui

import (
	"errors"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/persistence"
)

func TestStepsOfTheLastTurnAndTheOneBefore(t *testing.T) {
	f := newFakeTurns()
	s := NewStepsScreen()
	d := driveTurns(t, f, s)
	if s.seq != 3 {
		t.Fatalf("the screen opened at turn %d, want 3 (the last)", s.seq)
	}
	// Turn 3: its step was interrupted; the recovered output is shown
	// labeled incomplete.
	d.golden("steps_interrupted")
	v := d.view(80, 22)
	for _, want := range []string{"INTERRUPTED", "Recovered output", "INCOMPLETE", "Roses are red,"} {
		if !strings.Contains(v, want) {
			t.Errorf("turn 3 lacks %q:\n%s", want, v)
		}
	}
	d.press("right") // no turn 4
	if s.seq != 3 || f.called("TurnAt 4") != 0 {
		t.Errorf("right on the last turn moved to %d", s.seq)
	}

	// Turn 2: two steps and a tool call with its output.
	d.press("left")
	d.golden("steps_toolcall")
	v = d.view(80, 22)
	for _, want := range []string{"→ tool call call_1 grep({\"pattern\":\"TODO\",\"file\":\"main.go\"})",
		"← tool output call_1: main.go:3: TODO main.go:9: TODO main.go:20: TODO", " 1 openai/gpt-4o"} {
		if !strings.Contains(v, want) {
			t.Errorf("turn 2 lacks %q:\n%s", want, v)
		}
	}
	d.golden("steps_toolcall_60x16", 60, 16)

	d.press("left", "left") // turn 1, then nothing before it
	if s.seq != 1 || f.called("TurnAt 0") != 0 {
		t.Errorf("left twice from turn 2 is at turn %d", s.seq)
	}
	if v := normalizeScreen(d.view(80, 22)); !strings.Contains(v, "grep searches text") || !strings.Contains(v, "Tool calls:\n  none\n") {
		t.Errorf("turn 1 (found in the history before turn 2) =\n%s", v)
	}
}

func TestStepsAtATurn(t *testing.T) {
	f := newFakeTurns()
	s := NewStepsScreen()
	s.At(2)
	d := driveTurns(t, f, s)
	if s.seq != 2 {
		t.Fatalf("At(2) opened at turn %d", s.seq)
	}
	d.run(s.Open(d.st), 0)
	if s.seq != 3 {
		t.Errorf("reopened without At at turn %d, want the last (3)", s.seq)
	}

	s.At(9)
	d.takeShell()
	d.run(s.Open(d.st), 0)
	st := statuses(d.takeShell())
	if len(st) != 1 || !errors.Is(st[0].Err, persistence.ErrNodeNotFound) {
		t.Errorf("status for turn 9 = %+v, want ErrNodeNotFound", st)
	}
	if v := d.view(80, 20); !strings.Contains(v, "Cannot read turn 9") {
		t.Errorf("the screen does not say turn 9 cannot be read:\n%s", v)
	}
}

func TestStepsWithoutTurns(t *testing.T) {
	f := newFakeTurns()
	f.turns = nil
	d := driveTurns(t, f, NewStepsScreen())
	if n := f.called("TurnAt"); n != 0 {
		t.Errorf("with no turns the screen read %d turns", n)
	}
	if v := d.view(80, 20); !strings.Contains(v, "No turns yet") {
		t.Errorf("the screen does not say there are no turns:\n%s", v)
	}
}
