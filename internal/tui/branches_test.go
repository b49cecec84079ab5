package tui

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
)

// TestResolveBranchNames: labels, ids, and the start or end of an id
// (the short id the screens and the header show is an id's last 8).
func TestResolveBranchNames(t *testing.T) {
	f := newFakeSession(0)
	twin := api.Branch{ID: sessionID[messages.BranchID]("01JBTW", "TW1NTW1N"), Session: f.session.ID, Label: "fix-typo"}
	bs := append(slices.Clone(f.branches), twin)
	id := func(label string) messages.BranchID { return f.branch(label).ID }
	for _, c := range []struct {
		name string
		want messages.BranchID // zero: an error
		err  error
		msg  []string // what the error must say
	}{
		{name: "main", want: id("main")},
		{name: " experiment ", want: id("experiment")},
		{name: "exp-b", want: id("exp-b")},
		{name: id("exp-a").String(), want: id("exp-a")},
		{name: strings.ToLower(id("exp-a").String()), want: id("exp-a")},
		// the start of an id
		{name: "01JBMA", want: id("main")},
		{name: "01jbf2", want: id("fix-typo-2")},
		// its end: the short id shown
		{name: "MA1NMA1N", want: id("main")},
		{name: "ma1n", want: id("main")},
		{name: "EXPERMNT", want: id("experiment")},
		{name: "1SHARED01", want: id("exp-a")},
		{name: "TYP02", want: id("fix-typo-2")},
		// two branches are labeled fix-typo: the error names both
		{name: "fix-typo", err: ErrAmbiguousBranch, msg: []string{`2 branches are labeled "fix-typo"`,
			"fix-typo (F1XTYP00)", "fix-typo (TW1NTW1N)"}},
		// both exp-a's and exp-b's ids start with 01JBEA and end with SHARED01
		{name: "01JBEA", err: ErrAmbiguousBranch, msg: []string{`"01JBEA" starts or ends 2 branch ids`,
			"exp-a (1SHARED01)", "exp-b (2SHARED01)"}},
		{name: "shared01", err: ErrAmbiguousBranch, msg: []string{"2 branch ids"}},
		{name: "01JBE", err: ErrAmbiguousBranch, msg: []string{"3 branch ids", "experiment (EXPERMNT)"}},
		{name: "Main", err: ErrNoBranch, msg: []string{`"Main" is no branch's label (labels: main, experiment, fix-typo, exp-a, exp-b, fix-typo-2), nor the id, start or end of an id of one`}},
		{name: "nope", err: ErrNoBranch, msg: []string{"nor the id"}},
		{name: "01J", err: ErrNoBranch, msg: []string{"a part of an id needs 4 characters at least"}},
		{name: "1N", err: ErrNoBranch},
		{name: "01JBZZ", err: ErrNoBranch},
		{name: "", err: ErrNoBranch},
	} {
		got, err := ResolveBranch(bs, c.name)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("ResolveBranch(%q) = %s, %v; want error %v", c.name, got.Label, err, c.err)
				continue
			}
			for _, m := range c.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("ResolveBranch(%q) error %q does not say %q", c.name, err, m)
				}
			}
			continue
		}
		if err != nil || got.ID != c.want {
			t.Errorf("ResolveBranch(%q) = %s %s, %v; want %s", c.name, got.Label, got.ID, err, c.want)
		}
	}
}

func TestBranchesScreenTree(t *testing.T) {
	f := newFakeSession(0)
	r := newSessionRun(t, f, "fix-typo", NewBranchesScreen())
	r.golden("branches", 80, 24)
	r.golden("branches_small", 40, 8)

	// enter switches to the branch selected
	r.press("down", "down", "enter")
	st := r.takeShell()
	if len(st) != 1 {
		t.Fatalf("enter: shell got %v, want one SwitchMsg", st)
	}
	if sw, ok := st[0].(SwitchMsg); !ok || sw.Branch.ID != f.branch("experiment").ID {
		t.Errorf("down, down, enter from fix-typo: shell got %+v, want SwitchMsg to experiment", st[0])
	}
}

func TestBranchesScreenFork(t *testing.T) {
	f := newFakeSession(0)
	r := newSessionRun(t, f, "main", NewBranchesScreen())
	r.press("down", "down", "down") // experiment
	r.press("f")
	r.typeText("exp-c")
	r.golden("branches_fork_ask", 80, 24)
	r.press("enter")
	if got, want := f.calls[len(f.calls)-1], fmt.Sprintf("fork %s  exp-c", f.branch("experiment").ID); got != want {
		t.Errorf("fork: backend call %q, want %q", got, want)
	}
	st := r.takeShell()
	if len(st) != 1 || !strings.Contains(st[0].(StatusMsg).Text, "forked experiment (EXPERMNT) at its head: branch exp-c (F0RK0001)") {
		t.Errorf("fork: shell got %v, want a StatusMsg naming the new branch", st)
	}
	r.golden("branches_forked", 80, 24) // the new branch in the tree, selected
}

func TestBranchesScreenDelete(t *testing.T) {
	f := newFakeSession(0)
	r := newSessionRun(t, f, "main", NewBranchesScreen())

	// experiment has forks: the backend refuses, the screen says why
	r.press("down", "down", "down", "d")
	r.golden("branches_delete_ask", 80, 24)
	r.press("y")
	if got, want := f.calls[len(f.calls)-1], "delete "+f.branch("experiment").ID.String(); got != want {
		t.Errorf("d, y: backend call %q, want %q", got, want)
	}
	st := r.takeShell()
	if len(st) != 1 || !errors.Is(st[0].(StatusMsg).Err, actors.ErrHasForks) {
		t.Errorf("deleting a branch with forks: shell got %v, want a StatusMsg with ErrHasForks", st)
	}
	r.golden("branches_delete_refused", 80, 24)

	// n keeps it
	n := len(f.calls)
	r.press("down", "d", "n")
	if len(f.calls) != n {
		t.Errorf("d, n: backend calls %q, want none", f.calls[n:])
	}

	// exp-a goes
	expA := f.branch("exp-a").ID
	r.press("d", "y")
	if got, want := f.calls[len(f.calls)-1], "delete "+expA.String(); got != want {
		t.Errorf("d, y on exp-a: backend call %q, want %q", got, want)
	}
	st = r.takeShell()
	if len(st) != 1 || st[0].(StatusMsg).Err != nil || !strings.Contains(st[0].(StatusMsg).Text, "deleted branch exp-a") {
		t.Errorf("delete exp-a: shell got %v, want a StatusMsg saying it was deleted", st)
	}
	r.golden("branches_deleted", 80, 24)
}

// TestBranchesScreenDeleteCurrent deletes the current branch: the shell
// is told to switch to its parent.
func TestBranchesScreenDeleteCurrent(t *testing.T) {
	f := newFakeSession(0)
	r := newSessionRun(t, f, "fix-typo-2", NewBranchesScreen())
	r.press("d", "y") // the current branch is selected on open
	var sw *SwitchMsg
	for _, m := range r.takeShell() {
		if s, ok := m.(SwitchMsg); ok {
			sw = &s
		}
	}
	if sw == nil || sw.Branch.ID != f.branch("fix-typo").ID {
		t.Errorf("deleting the current branch: SwitchMsg %+v, want one to its parent fix-typo", sw)
	}
}

func TestBranchesScreenFilter(t *testing.T) {
	f := newFakeSession(0)
	r := newSessionRun(t, f, "main", NewBranchesScreen())
	m := r.scr.(Modal)
	r.press("/")
	r.typeText("EXP")
	r.golden("branches_filter_typing", 80, 24)
	r.press("enter")
	if !m.Modal() {
		t.Errorf("a filter set: Modal() = false, want true (esc clears it first)")
	}
	r.press("down", "enter")
	st := r.takeShell()
	if len(st) != 1 || st[0].(SwitchMsg).Branch.Label != "exp-a" {
		t.Errorf("filter exp, down, enter: shell got %v, want SwitchMsg to exp-a", st)
	}
	r.press("/", "backspace", "backspace", "backspace")
	r.typeText("zzz")
	r.press("enter")
	if got := r.view(80, 24); !strings.Contains(got, `no branch label contains "zzz"`) {
		t.Errorf("filter zzz: got\n%s", got)
	}
	r.press("enter", "d", "f")
	if m.Modal() != true || len(r.takeShell()) != 0 {
		t.Errorf("keys on an empty filtered tree did something")
	}
	r.press("esc")
	if m.Modal() {
		t.Errorf("esc: Modal() = true, want the filter cleared")
	}
	if got := r.view(80, 24); !strings.Contains(got, "fix-typo-2") {
		t.Errorf("esc: want the whole tree again, got\n%s", got)
	}
}

func TestBranchesScreenLoadError(t *testing.T) {
	f := newFakeSession(0)
	r := newSessionRun(t, f, "main", NewBranchesScreen())
	r.st.Branch.Session = sessionID[messages.SessionID]("01JBSX", "")
	r.run(r.scr.Open(r.st))
	if got := r.view(80, 24); !strings.Contains(got, "could not read the branches: fakeSession: no session") {
		t.Errorf("a failed load: got\n%s", got)
	}
	if st := r.takeShell(); len(st) != 1 || st[0].(StatusMsg).Err == nil {
		t.Errorf("a failed load: shell got %v, want a StatusMsg with Err", st)
	}
}
