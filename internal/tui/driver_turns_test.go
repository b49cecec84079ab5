package tui

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// The golden files are rewritten with -update (the package's other
// golden tests may define the flag too: it is defined once).
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files")
	}
}

func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// turnsDriver drives a Screen as the shell does: it opens it, sends it
// keys, runs the commands it returns synchronously (feeding their
// results back), and keeps the messages meant for the shell.
type turnsDriver struct {
	t     *testing.T
	f     *fakeTurns
	st    *State
	scr   Screen
	shell []tea.Msg // StatusMsg, RefreshMsg, CloseMsg, SwitchMsg, in order
}

func driveTurns(t *testing.T, f *fakeTurns, scr Screen) *turnsDriver {
	t.Helper()
	d := &turnsDriver{t: t, f: f, st: f.state(), scr: scr}
	d.run(scr.Open(d.st), 0)
	return d
}

func (d *turnsDriver) run(cmd tea.Cmd, depth int) {
	d.t.Helper()
	if cmd == nil {
		return
	}
	if depth > 20 {
		d.t.Fatal("commands keep producing commands")
	}
	switch msg := cmd().(type) {
	case nil:
	case tea.BatchMsg:
		for _, c := range msg {
			d.run(c, depth+1)
		}
	case RefreshMsg:
		d.shell = append(d.shell, msg)
		d.st.Info = d.f.info() // what the shell does on RefreshMsg
	case StatusMsg, CloseMsg, SwitchMsg:
		d.shell = append(d.shell, msg)
	default:
		d.run(d.scr.Update(d.st, msg), depth+1)
	}
}

// keyPress is the message of the key named k (as msg.String() names it).
func turnsKey(t *testing.T, k string) tea.KeyPressMsg {
	t.Helper()
	codes := map[string]rune{"enter": tea.KeyEnter, "esc": tea.KeyEscape, "tab": tea.KeyTab, "up": tea.KeyUp,
		"down": tea.KeyDown, "left": tea.KeyLeft, "right": tea.KeyRight, "pgdown": tea.KeyPgDown, "backspace": tea.KeyBackspace}
	msg := tea.KeyPressMsg{Code: codes[k]}
	if msg.Code == 0 {
		r := []rune(k)
		msg = tea.KeyPressMsg{Code: r[0], Text: k}
	}
	if msg.String() != k {
		t.Fatalf("turnsKey(%q).String() = %q", k, msg.String())
	}
	return msg
}

func (d *turnsDriver) press(keys ...string) {
	d.t.Helper()
	for _, k := range keys {
		d.run(d.scr.Update(d.st, turnsKey(d.t, k)), 0)
	}
}

// typeText types s into the screen, a key per rune.
func (d *turnsDriver) typeText(s string) {
	d.t.Helper()
	for _, r := range s {
		d.run(d.scr.Update(d.st, tea.KeyPressMsg{Code: r, Text: string(r)}), 0)
	}
}

// takeShell returns the messages sent to the shell since the last call.
func (d *turnsDriver) takeShell() []tea.Msg {
	out := d.shell
	d.shell = nil
	return out
}

// view renders the screen in width×height and checks that it fits.
func (d *turnsDriver) view(width, height int) string {
	d.t.Helper()
	v := d.scr.View(d.st, width, height)
	lines := strings.Split(v, "\n")
	if len(lines) > height {
		d.t.Errorf("%s: View(%d, %d) has %d lines", d.scr.Name(), width, height, len(lines))
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w > width {
			d.t.Errorf("%s: View(%d, %d) line %d is %d cells wide: %q", d.scr.Name(), width, height, i, w, l)
		}
	}
	return v
}

// frame is the screen as the shell shows it in a terminal of
// width×height: a title line, the screen's area and the help line.
func (d *turnsDriver) frame(width, height int) string {
	d.t.Helper()
	title := ansi.Truncate("── "+d.scr.Name()+" "+strings.Repeat("─", width), width, "")
	return title + "\n" + d.view(width, height-2) + "\n" + ansi.Truncate(helpLine(d.scr.Keys()), width, "…")
}

// helpLine is key bindings as a help line.
func helpLine(keys []key.Binding) string {
	var parts []string
	for _, k := range keys {
		parts = append(parts, k.Help().Key+" "+k.Help().Desc)
	}
	return strings.Join(parts, " · ")
}

// golden compares the frame at 80×24 (or the size given) with
// testdata/turns/name.golden, without colours or trailing spaces.
func (d *turnsDriver) golden(name string, size ...int) {
	d.t.Helper()
	w, h := 80, 24
	if len(size) == 2 {
		w, h = size[0], size[1]
	}
	got := normalizeScreen(d.frame(w, h))
	if n := strings.Count(got, "\n") + 1; n != h {
		d.t.Errorf("%s: frame has %d lines, want %d", name, n, h)
	}
	path := filepath.Join("testdata", "turns", name+".golden")
	if updating() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			d.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			d.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		d.t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		d.t.Errorf("%s: the screen differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

func normalizeScreen(s string) string {
	lines := strings.Split(ansi.Strip(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// statuses are the StatusMsgs among msgs.
func statuses(msgs []tea.Msg) []StatusMsg {
	var out []StatusMsg
	for _, m := range msgs {
		if s, ok := m.(StatusMsg); ok {
			out = append(out, s)
		}
	}
	return out
}

func hasMsg[T any](msgs []tea.Msg) bool {
	for _, m := range msgs {
		if _, ok := m.(T); ok {
			return true
		}
	}
	return false
}

func (f *fakeTurns) called(prefix string) int {
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// The screens are Screens; those with modes of their own take Esc
// while in them (the shell's Modal interface).
var (
	_ Screen                    = (*ChunksScreen)(nil)
	_ Screen                    = (*PendingScreen)(nil)
	_ Screen                    = (*StepsScreen)(nil)
	_ Screen                    = (*ModelsScreen)(nil)
	_ interface{ Modal() bool } = (*ChunksScreen)(nil)
	_ interface{ Modal() bool } = (*PendingScreen)(nil)
)
