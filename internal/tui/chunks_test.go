package tui

import (
	"errors"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

func TestChunksSearchShowsScoresAndText(t *testing.T) {
	f := newFakeTurns()
	c := newChunksScreen()
	d := driveTurns(t, f, c)
	if !c.Modal() {
		t.Fatal("Modal() = false with the query input focused on open, want true (Esc must leave the input, not the screen)")
	}
	d.golden("chunks_open")

	d.typeText("TODO main.go")
	d.press("enter")
	if got := f.calls[len(f.calls)-1]; got != `Search "TODO main.go" 8` {
		t.Fatalf("last call = %s, want Search \"TODO main.go\" 8 (k defaults to %d)", got, DefaultSearchK)
	}
	if c.Modal() {
		t.Error("Modal() = true after a search with hits, want false: the focus moves to the list")
	}
	d.golden("chunks_search")

	d.press("down", "enter")
	if !c.Modal() {
		t.Error("Modal() = false while a chunk's text is shown, want true (Esc goes back to the list)")
	}
	d.golden("chunks_hit")
	d.press("esc")
	if c.Modal() || c.reading {
		t.Error("Esc on a chunk's text did not go back to the list")
	}
	d.press("/")
	if !c.Modal() {
		t.Error("/ did not focus the query input")
	}
	d.press("esc")
	if c.Modal() {
		t.Error("Esc in the input kept the input focused")
	}
}

func TestChunksSearchRelayoutsOnResize(t *testing.T) {
	f := newFakeTurns()
	d := driveTurns(t, f, newChunksScreen())
	d.typeText("TODO")
	d.press("enter", "down", "down")
	d.golden("chunks_search_60x16", 60, 16)
	for _, sz := range [][2]int{{80, 24}, {40, 10}, {20, 5}, {120, 40}} {
		d.view(sz[0], sz[1]) // checks the fit
	}
}

func TestChunksSearchErrorIsStatus(t *testing.T) {
	f := newFakeTurns()
	f.searchErr = errors.New("retrieval is disabled (memory.enabled: false)")
	c := newChunksScreen()
	d := driveTurns(t, f, c)
	d.press("enter") // an empty query runs nothing
	if n := f.called("Search"); n != 0 {
		t.Fatalf("an empty query ran %d searches", n)
	}
	d.typeText("x")
	d.press("enter")
	st := statuses(d.takeShell())
	if len(st) != 1 || !errors.Is(st[0].Err, f.searchErr) {
		t.Fatalf("status after a failed search = %+v, want one with its error", st)
	}
	if v := d.view(80, 20); !strings.Contains(v, "search failed: retrieval is disabled") {
		t.Errorf("the screen does not say the search failed:\n%s", v)
	}
}

func TestChunksContextDebugPackedVersusOffered(t *testing.T) {
	f := newFakeTurns()
	c := newChunksScreen()
	d := driveTurns(t, f, c)
	d.press("tab")
	if c.Modal() {
		t.Error("Modal() = true on the debug tab, want false")
	}
	if got := f.calls[len(f.calls)-1]; got != `Context 3 ""` {
		t.Fatalf("last call = %s, want Context 3 \"\" (the branch's last turn)", got)
	}
	d.golden("chunks_debug")
	v := normalizeScreen(d.view(80, 22))
	tail := func(n byte) string { return idTail(turnsID[messages.ChunkID](n)) }
	for _, want := range []string{"0.912  " + tail(31) + "  yes ", "0.803  " + tail(32) + "  as summary ",
		"0.611  " + tail(33) + "  no\n", "Retrieval offered 3 chunks; 2 packed", "matches what was sent"} {
		if !strings.Contains(v, want) {
			t.Errorf("the debug view lacks %q:\n%s", want, v)
		}
	}

	// Turn 1 recorded no context: the screen says so, and so does the
	// status line.
	d.takeShell()
	d.press("left", "left")
	if got := f.calls[len(f.calls)-1]; got != `Context 1 ""` {
		t.Fatalf("last call = %s, want Context 1 \"\"", got)
	}
	st := statuses(d.takeShell())
	if len(st) != 1 || !errors.Is(st[0].Err, ErrNoContext) {
		t.Fatalf("status = %+v, want ErrNoRecipe", st)
	}
	d.golden("chunks_debug_norecipe")
	d.press("left") // no turn 0
	if got := f.calls[len(f.calls)-1]; got != `Context 1 ""` {
		t.Errorf("left at turn 1 called %s", got)
	}
}

func TestChunksContextDebugWithoutTurns(t *testing.T) {
	f := newFakeTurns()
	d := driveTurns(t, f, newChunksScreen())
	d.st.Info.TurnSeq = 0
	d.press("tab")
	if n := f.called("Context"); n != 0 {
		t.Errorf("with no turns the screen asked for %d contexts", n)
	}
	if v := d.view(80, 20); !strings.Contains(v, "No turns yet") {
		t.Errorf("the debug tab does not say there are no turns:\n%s", v)
	}
}

func TestDebugLinesSaysWhenTheRebuildDiffers(t *testing.T) {
	d := newFakeTurns().debugs[3]
	d.Matches, d.RebuiltHash = false, "0123456789abcdef"
	got := strings.Join(debugLines(d, 3, 200), "\n")
	if !strings.Contains(got, "DIFFERS from what was sent: sent 9f2c4e6a8b0d, rebuilt 0123456789ab") {
		t.Errorf("debugLines of a context that differs =\n%s", got)
	}
	d.SentHash = ""
	if got := strings.Join(debugLines(d, 0, 80), "\n"); !strings.Contains(got, "the context the next turn would get") {
		t.Errorf("debugLines of the next turn's context =\n%s", got)
	}
}

func TestChunksBrowseTurnByTurn(t *testing.T) {
	f := newFakeTurns()
	c := newChunksScreen()
	d := driveTurns(t, f, c)
	f.calls = nil
	d.press("tab", "tab")
	if c.tab != tabBrowse || c.Modal() {
		t.Fatalf("two tabs: tab %d, Modal() %v; want the browse tab, not modal", c.tab, c.Modal())
	}
	// It opens at the newest turn that has chunks: 3 (failed) and 2
	// (pending) have none, 1 has two.
	want := []string{"TurnAt 3", "Turn", "TurnAt 2", "Turn", "TurnAt 1", "Turn"}
	if got := f.calls[len(f.calls)-len(want):]; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("calls = %v, want %v", f.calls, want)
	}
	d.golden("chunks_browse")

	d.press("down", "enter")
	if !c.Modal() {
		t.Error("Modal() = false while a chunk's text is shown, want true (Esc goes back to the list)")
	}
	d.golden("chunks_browse_chunk")
	v := d.view(80, 22)
	for _, w := range []string{"explanation · turn #1 · 12 tokens", "from the reply " + idTail(turnsID[messages.NodeID](12)) + ", bytes 0-49",
		"grep searches text", "Summary: grep searches"} {
		if !strings.Contains(v, w) {
			t.Errorf("the chunk's view lacks %q:\n%s", w, v)
		}
	}
	d.press("esc")
	if c.Modal() || c.browse.reading {
		t.Error("Esc on a chunk's text did not go back to the list")
	}

	// ← at turn 1 goes nowhere; → shows turn 2, which is pending.
	n := len(f.calls)
	d.press("left")
	if len(f.calls) != n || c.browse.seq != 1 {
		t.Errorf("← at turn 1: calls %v, turn %d", f.calls[n:], c.browse.seq)
	}
	d.press("right")
	if got := f.calls[len(f.calls)-2:]; got[0] != "TurnAt 2" || got[1] != "Turn" || c.browse.seq != 2 {
		t.Fatalf("→ from turn 1: calls %v, turn %d; want turn 2", got, c.browse.seq)
	}
	d.golden("chunks_browse_nochunks")
	d.press("enter") // nothing to read
	if c.browse.reading {
		t.Error("enter on a turn without chunks shows a chunk")
	}
	d.press("right")
	if v := d.view(80, 22); c.browse.seq != 3 || !strings.Contains(v, "Turn 3 failed: a failed turn is not indexed") {
		t.Errorf("→ to turn 3 (failed): turn %d\n%s", c.browse.seq, v)
	}
	n = len(f.calls)
	d.press("right") // no turn 4
	if len(f.calls) != n || c.browse.seq != 3 {
		t.Errorf("→ at the last turn: calls %v, turn %d", f.calls[n:], c.browse.seq)
	}
	d.press("left", "left")
	if v := d.view(80, 22); c.browse.seq != 1 || !strings.Contains(v, "> "+idTail(turnsID[messages.ChunkID](34))) {
		t.Errorf("← ← back to turn 1: turn %d, want its first chunk selected:\n%s", c.browse.seq, v)
	}
	if s := statuses(d.takeShell()); len(s) != 0 {
		t.Errorf("browsing sent statuses %+v", s)
	}

	// tab goes on to the search tab, its query input focused again;
	// shift+tab goes back.
	d.press("tab")
	if c.tab != tabSearch || !c.Modal() {
		t.Errorf("tab from browse: tab %d, Modal() %v; want search with its input focused", c.tab, c.Modal())
	}
	d.run(c.Update(d.st, tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}), 0)
	if c.tab != tabBrowse {
		t.Errorf("shift+tab from search: tab %d, want browse", c.tab)
	}
}

func TestChunksBrowseWithoutChunks(t *testing.T) {
	f := newFakeTurns()
	t1 := f.infos[f.turns[0].ID]
	t1.Chunks = []api.ChunkInfo{}
	f.infos[t1.ID] = t1
	c := newChunksScreen()
	c.tab = tabBrowse
	d := driveTurns(t, f, c)
	// No turn has chunks: the newest is shown, saying why it has none.
	if v := d.view(80, 22); c.browse.seq != 3 || !strings.Contains(v, "None of the last 3 turns has chunks yet. Turn 3 failed") {
		t.Errorf("browse with no chunks: turn %d\n%s", c.browse.seq, v)
	}
	d.st.Info.TurnSeq = 0
	n := len(f.calls)
	d.run(c.Open(d.st), 0)
	if v := d.view(80, 22); len(f.calls) != n || !strings.Contains(v, "No turns yet") {
		t.Errorf("browse with no turns: calls %v\n%s", f.calls[n:], v)
	}
	// A turn that fails to load is a status.
	d.st.Info.TurnSeq = 9
	d.run(c.Open(d.st), 0)
	if st := statuses(d.takeShell()); len(st) != 1 || !errors.Is(st[0].Err, persistence.ErrNodeNotFound) {
		t.Errorf("status of a turn that is not there = %+v", st)
	}
}

// The debug view shows what the model was given beside the messages: an
// API client's system prompt, the tools offered with their mode and
// choice, the client's settings; a turn with none of them shows none.
func TestDebugLinesShowWhatTheModelWasGiven(t *testing.T) {
	d := newFakeTurns().debugs[3]
	plain := strings.Join(debugLines(d, 3, 200), "\n")
	if strings.Contains(plain, "Tools offered") || strings.Contains(plain, "System prompt") || strings.Contains(plain, "Settings") {
		t.Errorf("a plain turn's view shows what it was not given:\n%s", plain)
	}
	d.ClientSystem = "You are a weather agent.\nAnswer in one line."
	d.Context.Tools = []messages.Tool{{Name: "grep", Description: "search the history"}, {Name: "get_weather", Description: "the weather\nof a city"}}
	d.Context.ToolMode, d.Context.ToolChoice = messages.ToolsEnabled, messages.ToolChoice{Mode: messages.ToolChoiceTool, Name: "get_weather"}
	d.Params = messages.GenParams{Temperature: new(0.2)}
	got := strings.Join(debugLines(d, 3, 200), "\n")
	for _, want := range []string{
		"System prompt (the client's; the runtime's instructions follow):\n  You are a weather agent.\n  Answer in one line.",
		"Tools offered: 2 (mode enabled, choice tool get_weather)\n  grep  search the history\n  get_weather  the weather",
		`Settings: {"temperature":0.2}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the debug view lacks %q:\n%s", want, got)
		}
	}
}
