package tui

import (
	"fmt"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
)

// TestHeaderDuringStream follows the header through a turn, at 80×24
// and 120×40: before any delta (accepted, nothing shown), mid-stream
// with text shown that is not durable yet (buffered), and after the
// turn's end (durable = displayed, the turn's phase re-read).
func TestHeaderDuringStream(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			f := newFakeShell()
			f.gate = make(chan struct{})
			h := newHarness(t, f, size[0], size[1])
			name := func(s string) string { return fmt.Sprintf("stream_%s_%dx%d", s, size[0], size[1]) }
			h.contains("session demo", "branch main "+short(f.branches[0].ID), "state #3 "+short(f.info[f.branches[0].ID].State.ID),
				"pending 1", "turn 2: failed", "model echo-1", "[incomplete] It keeps a bounded")

			h.enter("Say hello")
			h.golden(name("accepted"))
			if got := h.line(1); !strings.Contains(got, "turn: accepted · Stream: 0/0 B") || strings.Contains(got, "buffered") {
				t.Errorf("header before any delta: %q, want turn: accepted, Stream: 0/0 B, not buffered", got)
			}

			f.gate <- struct{}{}
			h.until("the first delta shows", func() bool { return h.m.turn.displayed == 5 })
			h.golden(name("buffered"))
			if got := h.line(1); !strings.Contains(got, "turn: responding · Stream: 0/5 B (buffered)") {
				t.Errorf("header mid-stream: %q, want turn: responding · Stream: 0/5 B (buffered)", got)
			}
			h.contains("assistant: Hello")

			f.gate <- struct{}{}
			h.until("the second delta shows", func() bool { return h.m.turn.displayed == 12 })
			h.contains("Stream: 5/12 B (buffered)", "assistant: Hello, world")

			f.gate <- struct{}{}
			h.until("the turn ends", func() bool { return !h.m.turn.active })
			h.settle()
			h.golden(name("done"))
			if got := h.line(1); !strings.Contains(got, "pending 2 · turn 3: response_finalized · Stream: 12/12 B") ||
				strings.Contains(got, "buffered") {
				t.Errorf("header after the turn: %q, want pending 2 · turn 3: response_finalized · Stream: 12/12 B", got)
			}
			if want := []string{"Say hello"}; fmt.Sprint(f.submitted) != fmt.Sprint(want) {
				t.Errorf("submitted %q, want %q", f.submitted, want)
			}
		})
	}
}

// TestEnterRefusedWhileStreaming: a second message while a turn streams
// is not sent (the line stays, the status says why); esc cancels the
// turn through the backend, and the cancelled turn shows why it failed.
func TestEnterRefusedWhileStreaming(t *testing.T) {
	f := newFakeShell()
	f.gate = make(chan struct{})
	h := newHarness(t, f, 80, 24)
	h.enter("first")
	h.enter("second")
	h.contains("error: a turn is streaming: wait for it to end, or esc to cancel it", "> second")
	h.press("esc")
	h.until("the turn ends", func() bool { return !h.m.turn.active })
	h.settle()
	if f.cancels != 1 {
		t.Errorf("Cancel called %d times, want 1", f.cancels)
	}
	if fmt.Sprint(f.submitted) != "[first]" {
		t.Errorf("submitted %q, want only [first]", f.submitted)
	}
	h.contains("[cancelled (cancelled): cancelled by the client]", "turn 3: failed")
	h.golden("cancelled_80x24")
}

// TestCtrlCCancelsThenQuits: ctrl+c cancels a streaming turn and quits
// when none streams; ctrl+d quits.
func TestCtrlCCancelsThenQuits(t *testing.T) {
	f := newFakeShell()
	f.gate = make(chan struct{})
	h := newHarness(t, f, 80, 24)
	h.enter("first")
	h.press("ctrl+c")
	h.until("the turn ends", func() bool { return !h.m.turn.active })
	h.settle()
	if h.quit || f.cancels != 1 {
		t.Fatalf("after ctrl+c while streaming: quit %v, cancels %d; want no quit, 1 cancel", h.quit, f.cancels)
	}
	h.press("ctrl+c")
	h.settle()
	if !h.quit {
		t.Error("ctrl+c when idle did not quit")
	}

	h2 := newHarness(t, newFakeShell(), 80, 24)
	h2.press("ctrl+d")
	h2.settle()
	if !h2.quit {
		t.Error("ctrl+d did not quit")
	}
}

// TestResize re-lays the shell out on a new window size.
func TestResize(t *testing.T) {
	h := newHarness(t, newFakeShell(), 80, 24)
	h.golden("open_80x24")
	h.send(tea.WindowSizeMsg{Width: 120, Height: 40})
	h.golden("open_120x40")
	h.send(tea.WindowSizeMsg{Width: 60, Height: 16})
	h.golden("open_60x16")
	h.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	h.golden("open_80x24")
}
