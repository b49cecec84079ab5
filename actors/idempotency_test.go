package actors

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// A turn sent again under its idempotency key is not stored again: while
// the first runs the repeat reads the same turn's stream, once it ended
// its reply and outcome, from the store after a restart too; the key
// with another text is refused.
func TestSubmitByIdempotencyKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	block := make(chan struct{})
	cfg := testConfig(t, dir, newEvents())
	cfg.Provider = fake.New(fake.Step{Reply: "the answer", Block: block})
	r := openRuntime(t, cfg)
	_, b, err := r.CreateSession(bg, "keys")
	if err != nil {
		t.Fatal(err)
	}
	send := func(text, key string, within time.Duration) (*TurnStream, error) {
		return r.SubmitWith(bg, b.ID, text, SubmitOptions{Key: key, Within: within})
	}
	first, err := send("hello", "k1", 0)
	if err != nil {
		t.Fatal(err)
	}
	// The first is blocked in its step: the repeat follows it, not 409.
	again, err := send("hello", "k1", 0)
	if err != nil || again.Turn != first.Turn {
		t.Fatalf("repeat while in flight = %v, %v; want turn %s", again, err, first.Turn)
	}
	if _, err := send("hello, other text", "k1", 0); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("the key with another text = %v, want ErrKeyReused", err)
	}
	on := messages.MemoryToolsOn
	if _, err := r.SubmitWith(bg, b.ID, "hello", SubmitOptions{Key: "k1", MemoryTools: &on}); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("the key with a memory tools setting = %v, want ErrKeyReused", err)
	}
	close(block)
	for i, s := range []*TurnStream{first, again} {
		if text, last := s.Wait(nil); text != "the answer" || last.Phase != messages.PhaseResponseFinalized {
			t.Errorf("reader %d: %q, %s; want the answer, finalized", i, text, last.Phase)
		}
	}
	after, err := send("hello", "k1", 0)
	if err != nil || after.Turn != first.Turn {
		t.Fatalf("repeat after the end = %v, %v; want turn %s", after, err, first.Turn)
	}
	if text, last := after.Wait(nil); text != "the answer" || last.Phase < messages.PhaseResponseFinalized ||
		last.Outcome.Kind != messages.OutcomeCompleted {
		t.Errorf("repeat after the end: %q, %s, %v; want the answer, completed", text, last.Phase, last.Outcome.Kind)
	}
	// A deferred acceptance (the proxy's) holds its key until committed:
	// a repeat at once finds it all the same.
	d1, err := send("deferred", "k2", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := send("deferred", "k2", time.Second)
	if err != nil || d2.Turn != d1.Turn {
		t.Fatalf("deferred repeat = %v, %v; want turn %s", d2, err, d1.Turn)
	}
	d1.Wait(nil)
	d2.Wait(nil)
	if info, err := r.Inspect(bg, b.ID); err != nil || info.TurnSeq != 2 {
		t.Fatalf("turn seq %d, %v; want 2 turns for 6 sends under 2 keys", info.TurnSeq, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	r = openRuntime(t, cfg)
	defer r.Close()
	for _, c := range []struct {
		text, key string
		turn      messages.TurnID
		reply     string
	}{{"hello", "k1", first.Turn, "the answer"}, {"deferred", "k2", d1.Turn, "the answer"}} {
		s, err := send(c.text, c.key, 0)
		if err != nil || s.Turn != c.turn {
			t.Fatalf("key %s after a restart = %v, %v; want turn %s", c.key, s, err, c.turn)
		}
		if text, last := s.Wait(nil); text != c.reply || last.Phase < messages.PhaseResponseFinalized {
			t.Errorf("key %s after a restart: %q, %s", c.key, text, last.Phase)
		}
	}
	if _, err := send("hello", "k1 but other", 0); err != nil {
		t.Fatal(err) // a new key is a new turn
	}
	for _, bad := range []string{strings.Repeat("x", 256), "new\nline"} {
		if _, err := send("hello", bad, 0); !errors.Is(err, persistence.ErrInvalidArgument) {
			t.Errorf("key %q = %v, want ErrInvalidArgument", bad, err)
		}
	}
	if info, err := r.Inspect(bg, b.ID); err != nil || info.TurnSeq != 3 {
		t.Fatalf("after the restart: turn seq %d, %v; want 3", info.TurnSeq, err)
	}
}

// blocker holds a branch actor inside its Observe hook, at the first
// event that match picks once armed, until released.
type blocker struct {
	mu      sync.Mutex
	match   func(messages.BranchEvent) bool
	held    chan struct{}
	release chan struct{}
}

func (k *blocker) arm(match func(messages.BranchEvent) bool) {
	k.mu.Lock()
	k.match, k.held, k.release = match, make(chan struct{}), make(chan struct{})
	k.mu.Unlock()
}

func (k *blocker) observe(_ messages.BranchID, ev messages.BranchEvent) {
	k.mu.Lock()
	match, held, release := k.match, k.held, k.release
	if match != nil && match(ev) {
		k.match = nil
	} else {
		match = nil
	}
	k.mu.Unlock()
	if match != nil {
		close(held)
		<-release
	}
}

// A turn whose submit timed out says whether it was accepted: one the
// branch never read is dropped, not stored later; one the branch was
// accepting when the wait ended is "unknown", with its id, and its row
// tells later.
func TestTimedOutSubmitSaysWhetherAccepted(t *testing.T) {
	t.Parallel()
	k := &blocker{}
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.RequestTimeout = 300 * time.Millisecond
	cfg.Observe = k.observe
	r, b := branchOn(t, cfg)

	// The branch is busy (held in a pin's event): the turn waits unread.
	k.arm(isType[messages.FactPinned])
	pinned := make(chan error, 1)
	go func() { _, err := r.Pin(bg, b, "a fact"); pinned <- err }()
	<-k.held
	_, err := r.Submit(bg, b, "hello")
	var te *TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, ErrTimeout) || te.Accepted != AcceptedNo {
		t.Fatalf("Submit to a busy branch = %v, want a TimeoutError, not accepted", err)
	}
	close(k.release)
	<-pinned
	if info, err := r.Inspect(bg, b); err != nil || info.TurnSeq != 0 {
		t.Fatalf("after the time-out: turn seq %d, %v; want no turn (it said not accepted)", info.TurnSeq, err)
	}

	// The branch takes the turn and is held accepting it.
	k.arm(isType[messages.TurnAccepted])
	_, err = r.Submit(bg, b, "hello again")
	if !errors.As(err, &te) || te.Accepted != AcceptedUnknown || te.Turn.IsZero() {
		t.Fatalf("Submit held while accepted = %v, want a TimeoutError, unknown, with the turn", err)
	}
	if !strings.Contains(err.Error(), te.Turn.String()) {
		t.Errorf("error %q does not name the turn", err)
	}
	close(k.release)
	if _, err := r.Inspect(bg, b); err != nil {
		t.Fatal(err)
	}
	if row, err := r.DB().TurnRow(bg, b, te.Turn); err != nil {
		t.Fatalf("the turn said unknown: row %+v, %v; want it stored", row, err)
	}
}

// An exchange recorded again under its idempotency key is not stored
// again, after a restart too; the key with another exchange, or a
// submitted turn's key, is refused; without a key each record is a turn.
func TestRecordByIdempotencyKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, dir, newEvents())
	cfg.Provider = fake.New(fake.Step{Reply: "submitted"})
	cfg.Store.Limits.MaxPayloadBytes = 64 << 10
	r := openRuntime(t, cfg)
	_, b, err := r.CreateSession(bg, "record")
	if err != nil {
		t.Fatal(err)
	}
	x := func(user, reply string) Exchange {
		return Exchange{User: messages.NewMessage(messages.RoleUser, messages.Text{Text: user}),
			Reply: messages.NewMessage(messages.RoleAssistant, messages.Text{Text: reply})}
	}
	first, repeat, err := r.Record(bg, b.ID, x("where is the key?", "under the mat"), RecordOptions{Key: "r1"})
	if err != nil || repeat || first.Seq != 1 {
		t.Fatalf("Record = %+v, %v, %v; want turn 1, not a repeat", first, repeat, err)
	}
	again, repeat, err := r.Record(bg, b.ID, x("where is the key?", "under the mat"), RecordOptions{Key: "r1"})
	if err != nil || !repeat || again != first {
		t.Fatalf("Record again = %+v, %v, %v; want %+v, a repeat", again, repeat, err, first)
	}
	if _, _, err := r.Record(bg, b.ID, x("where is the key?", "in the drawer"), RecordOptions{Key: "r1"}); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("the key with another reply = %v, want ErrKeyReused", err)
	}
	if _, err := r.SubmitWith(bg, b.ID, "where is the key?", SubmitOptions{Key: "r1"}); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("a submit under a recorded exchange's key = %v, want ErrKeyReused", err)
	}
	s, err := r.SubmitWith(bg, b.ID, "hello", SubmitOptions{Key: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	s.Wait(nil)
	if _, _, err := r.Record(bg, b.ID, x("hello", "submitted"), RecordOptions{Key: "s1"}); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("a record under a submitted turn's key = %v, want ErrKeyReused", err)
	}
	for i := range 2 {
		if p, repeat, err := r.Record(bg, b.ID, x("no key", "no key"), RecordOptions{}); err != nil || repeat || p.Seq != uint64(3+i) {
			t.Fatalf("Record without a key = %+v, %v, %v; want turn %d", p, repeat, err, 3+i)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = openRuntime(t, cfg)
	defer r.Close()
	after, repeat, err := r.Record(bg, b.ID, x("where is the key?", "under the mat"), RecordOptions{Key: "r1"})
	if err != nil || !repeat || after != first {
		t.Fatalf("Record after a restart = %+v, %v, %v; want %+v, a repeat", after, repeat, err, first)
	}
	for _, key := range []string{"", "big"} {
		if _, _, err := r.Record(bg, b.ID, x("big", strings.Repeat("x", 65<<10)), RecordOptions{Key: key}); !errors.Is(err, persistence.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), "reply is") {
			t.Fatalf("a reply over the payload limit (key %q) = %v, want ErrInvalidArgument naming reply", key, err)
		}
	}
	if info, err := r.Inspect(bg, b.ID); err != nil || info.TurnSeq != 4 {
		t.Fatalf("turn seq %d, %v; want 4", info.TurnSeq, err)
	}
	if _, _, err := r.Record(bg, b.ID, Exchange{User: x("a", "b").Reply, Reply: x("a", "b").Reply}, RecordOptions{Key: "r2"}); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Fatalf("a user message of the assistant = %v, want ErrInvalidArgument", err)
	}
}
