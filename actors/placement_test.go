package actors

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// fakePlacement owns the sessions in mine; every other session is
// "other"'s. joined false: no member owns anything.
type fakePlacement struct {
	mu     sync.Mutex
	joined bool
	all    bool // own every session
	mine   map[messages.SessionID]bool
}

func (p *fakePlacement) Owner(s messages.SessionID) (string, bool, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.joined {
		return "", false, false
	}
	if p.all || p.mine[s] {
		return "me", true, true
	}
	return "other", false, true
}

func (p *fakePlacement) set(f func(p *fakePlacement)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

// A runtime with a Placement creates only sessions it owns, refuses
// requests to another member's sessions with a *NotOwnerError naming
// the owner, and when a session moves away stops its branch actors
// (Rebalance) and refuses it from then on; when it comes back the
// branch is activated again from the store, its turns intact.
func TestPlacement(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ev := newEvents()
	cfg := testConfig(t, dir, ev)
	p := &fakePlacement{mine: map[messages.SessionID]bool{}}
	cfg.Placement = p
	r := openRuntime(t, cfg)
	defer r.Close()

	// Not joined: no session can be created here.
	var no *NotOwnerError
	if _, _, err := r.CreateSession(bg, "early"); !errors.As(err, &no) || no.Owner != "" {
		t.Fatalf("create before joining: %v, want a NotOwnerError without an owner", err)
	}
	p.set(func(p *fakePlacement) { p.joined, p.all = true, true })
	s, b, err := r.CreateSession(bg, "mine")
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Submit(bg, b.ID, "first turn, here")
	if err != nil {
		t.Fatal(err)
	}
	if _, last := st.Wait(nil); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("turn ended %+v", last)
	}

	// The session moves to another member.
	p.set(func(p *fakePlacement) { p.all = false })
	stopped, _, err := r.Rebalance(bg)
	if err != nil || stopped != 1 {
		t.Fatalf("rebalance: %d stopped, %v; want the session's one branch", stopped, err)
	}
	if _, err := r.Submit(bg, b.ID, "second turn"); !errors.As(err, &no) || no.Owner != "other" || no.Session != s.ID {
		t.Fatalf("submit to a moved session: %v, want NotOwnerError{%s, other}", err, s.ID)
	}
	if _, err := r.Search(bg, b.ID, "turn", nil); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("search of a moved session: %v, want ErrNotOwner", err)
	}
	if _, err := r.DeleteSession(bg, s.ID); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("delete of a moved session: %v, want ErrNotOwner", err)
	}
	// The sessions it creates now are its own, whatever it draws first.
	for range 20 {
		p.set(func(p *fakePlacement) { p.mine = map[messages.SessionID]bool{} })
		ns, _, err := r.ownedID(p)
		if err != nil || !p.mine[ns] {
			t.Fatalf("owned session id %s, %v", ns, err)
		}
	}

	// It comes back: activated again from the store.
	p.set(func(p *fakePlacement) { p.all = true })
	st, err = r.Submit(bg, b.ID, "third turn")
	if err != nil {
		t.Fatal(err)
	}
	text, last := st.Wait(nil)
	if last.Phase != messages.PhaseResponseFinalized || !strings.Contains(text, "first turn, here") {
		t.Fatalf("turn after the session came back: %+v %q", last, text)
	}
}

// ownedID draws a session id as CreateSession does, marking every draw
// owned by p only on the third: it returns the id it settled on.
func (r *Runtime) ownedID(p *fakePlacement) (messages.SessionID, any, error) {
	n := 0
	id, err := r.ownedSessionID(func() messages.SessionID {
		id := messages.NewID[messages.SessionID](r.cfg.Now())
		if n++; n == 3 {
			p.set(func(p *fakePlacement) { p.mine[id] = true })
		}
		return id
	})
	return id, nil, err
}

// In a cluster, each member's retention job deletes only the sessions
// it owns: an idle session another member owns is that member's to
// delete (its branch actors run there).
func TestRetentionOwnSessionsOnly(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	cfg.Retention = RetentionPolicy{Idle: time.Minute, Interval: -1}
	p := &fakePlacement{joined: true, all: true, mine: map[messages.SessionID]bool{}}
	cfg.Placement = p
	r := openRuntime(t, cfg)
	defer r.Close()
	s, _, err := r.CreateSession(bg, "idle")
	if err != nil {
		t.Fatal(err)
	}
	skew.Store(int64(time.Hour)) // idle past its retention
	p.set(func(p *fakePlacement) { p.all = false })
	if run, err := r.RunRetention(bg); err != nil || len(run.Deleted) != 0 {
		t.Fatalf("retention of another member's session: %+v, %v; want nothing deleted", run, err)
	}
	p.set(func(p *fakePlacement) { p.all = true })
	if run, err := r.RunRetention(bg); err != nil || len(run.Deleted) != 1 || run.Deleted[0] != s.ID {
		t.Fatalf("retention of its own idle session: %+v, %v; want %s deleted", run, err, s.ID)
	}
}
