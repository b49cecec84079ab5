package actors

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/pgtest"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence/pgdb"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// Two runtimes on one PostgreSQL database that both believe they own a
// session (a cluster whose membership is changing) both activate its
// branch. The one whose state is stale cannot commit: its turn fails,
// the store counts the refusal, the branch holds only the turns that
// committed, each once, and after its actor restarts from the store it
// commits on top of the other's turns.
func TestStaleActivationCannotCommit(t *testing.T) {
	t.Parallel()
	url := pgtest.Start(t)
	open := func() *Runtime {
		cfg := testConfig(t, t.TempDir(), newEvents())
		o := pgdb.DefaultPGOptions(url)
		cfg.Postgres = &o
		cfg.Placement = &fakePlacement{joined: true, all: true} // each believes it owns everything
		r := openRuntime(t, cfg)
		t.Cleanup(func() { r.Close() })
		return r
	}
	a, b := open(), open()
	_, br, err := a.CreateSession(bg, "contested")
	if err != nil {
		t.Fatal(err)
	}
	turn := func(r *Runtime, text string) Update {
		t.Helper()
		s, err := r.Submit(bg, br.ID, text)
		if err != nil {
			return Update{Err: err.Error()}
		}
		_, last := s.Wait(nil)
		return last
	}
	if u := turn(a, "one, through a"); u.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("turn one: %+v", u)
	}
	if u := turn(b, "two, through b"); u.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("turn two: %+v", u)
	}
	// a's branch actor still holds the state before turn two.
	before := a.DB().Stats().HeadRejects
	t0 := time.Now()
	u3 := turn(a, "three, through a, stale")
	t.Logf("the stale turn ended in %v: %+v", time.Since(t0), u3)
	if u := u3; u.Phase == messages.PhaseResponseFinalized {
		t.Fatalf("a stale activation finalized a turn: %+v", u)
	}
	if got := a.DB().Stats().HeadRejects; got <= before {
		t.Fatalf("head rejects %d, want more than %d", got, before)
	}
	// Activated again from the store, a commits after b's turn.
	var u Update
	for range 50 {
		if u = turn(a, "four, through a"); u.Phase == messages.PhaseResponseFinalized {
			break
		}
	}
	if u.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("turn four after a's actor restarted: %+v", u)
	}
	entries, _, err := b.History(bg, br.ID, messages.TurnID{}, 50)
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, e := range entries {
		if e.Message.Role == messages.RoleUser {
			users = append(users, e.Message.RenderedText)
		}
	}
	if want := []string{"one, through a", "two, through b", "four, through a"}; !slices.Equal(users, want) {
		t.Fatalf("the branch's user messages: %q, want %q", users, want)
	}
}
