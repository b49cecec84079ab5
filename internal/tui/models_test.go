package tui

import (
	"errors"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
)

func TestModelsSelect(t *testing.T) {
	f := newFakeTurns()
	d := driveTurns(t, f, NewModelsScreen())
	d.golden("models")
	d.press("up")
	d.golden("models_cursor")
	d.takeShell()
	d.press("enter")
	if f.model != "local" {
		t.Fatalf("the branch's model is %q after selecting local", f.model)
	}
	msgs := d.takeShell()
	st := statuses(msgs)
	if len(st) != 1 || st[0].Err != nil || st[0].Text != "model: local" {
		t.Errorf("status = %+v, want model: local", st)
	}
	if !hasMsg[RefreshMsg](msgs) || !hasMsg[CloseMsg](msgs) {
		t.Errorf("selecting sent %v, want a refresh and a close", msgs)
	}
	d.golden("models_selected")
}

func TestModelsSelectErrorIsStatus(t *testing.T) {
	f := newFakeTurns()
	f.selectErr = errors.New("branch is busy")
	d := driveTurns(t, f, NewModelsScreen())
	d.press("down") // at the end: stays on smart
	d.takeShell()
	d.press("enter")
	msgs := d.takeShell()
	if st := statuses(msgs); len(st) != 1 || !errors.Is(st[0].Err, f.selectErr) {
		t.Errorf("status = %+v, want the error", st)
	}
	if hasMsg[CloseMsg](msgs) || hasMsg[RefreshMsg](msgs) {
		t.Errorf("a failed selection sent %v", msgs)
	}
	if v := d.view(80, 20); !strings.Contains(v, "Cannot select smart: branch is busy") {
		t.Errorf("the screen does not say the selection failed:\n%s", v)
	}
}

func TestModelsDefault(t *testing.T) {
	f := newFakeTurns()
	f.model = ""
	d := driveTurns(t, f, NewModelsScreen())
	v := d.view(80, 20)
	if !strings.Contains(v, "default model (openai/gpt-4o-mini)") || strings.Contains(v, "(current)") {
		t.Errorf("with no model selected:\n%s", v)
	}
	d.view(30, 3)
	var _ tea.Msg = CloseMsg{}
}
