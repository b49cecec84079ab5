package actors

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/fake"
	"github.com/contextinfinity/ctxinf/providers/local"
)

var bg = context.Background()

// events collects what branch actors applied, for tests to wait on.
type events struct {
	mu   sync.Mutex
	log  []messages.BranchEvent
	wake chan struct{}
}

func newEvents() *events { return &events{wake: make(chan struct{}, 1)} }

func (e *events) observe(_ messages.BranchID, ev messages.BranchEvent) {
	e.mu.Lock()
	e.log = append(e.log, ev)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// waitFor waits until n events match ok, or fails after a timeout.
func (e *events) waitFor(t *testing.T, what string, n int, ok func(messages.BranchEvent) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		e.mu.Lock()
		c := 0
		for _, ev := range e.log {
			if ok(ev) {
				c++
			}
		}
		e.mu.Unlock()
		if c >= n {
			return
		}
		select {
		case <-e.wake:
		case <-deadline:
			t.Fatalf("timed out waiting for %d %s events (have %d)", n, what, c)
		}
	}
}

// count counts the events so far that match ok.
func (e *events) count(ok func(messages.BranchEvent) bool) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := 0
	for _, ev := range e.log {
		if ok(ev) {
			c++
		}
	}
	return c
}

func isType[T messages.BranchEvent](ev messages.BranchEvent) bool { _, ok := ev.(T); return ok }

func testConfig(t testing.TB, dir string, ev *events) Config {
	store := badgerdb.TestOptions("")
	store.Durability = persistence.DurabilityRelaxed
	return Config{
		DataDir:        dir,
		Store:          store,
		SnapshotEvery:  8,
		Provider:       local.New(local.Options{}),
		Model:          "local",
		RequestTimeout: 10 * time.Second,
		Logger:         zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		Observe:        ev.observe,
	}
}

// FillConfig sets the settings a test's configuration leaves unset from
// config.yaml's defaults, as ctxinf.Open does (wiring.Fill). wiring
// imports this package, so no file of it can import wiring: the
// external test file fill_config_test.go sets FillConfig.
var FillConfig func(Config) Config

// openRuntime opens a runtime on cfg, its unset settings filled
// (FillConfig).
func openRuntime(t testing.TB, cfg Config) *Runtime {
	t.Helper()
	r, err := Open(bg, FillConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Open takes no defaults of its own: a Config that leaves the settings
// unset is refused, naming each, and the data directory stays empty.
func TestOpenRefusesUnsetSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := Open(bg, Config{DataDir: dir, Provider: local.New(local.Options{})})
	for _, field := range []string{"RequestTimeout", "IdleAfter", "SnapshotEvery", "MaxRestarts", "Retention.Interval",
		"FoldAtFraction", "Retry", "Fold", "Rank", "Journal"} {
		if err == nil || !strings.Contains(err.Error(), "Config."+field+":") {
			t.Errorf("Open(Config{}) = %v, want an error naming Config.%s", err, field)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("Open(Config{}) left %d entries in the data dir, want none", len(entries))
	}
	cfg := FillConfig(Config{DataDir: dir, Provider: local.New(local.Options{})})
	cfg.Retention.Batch = 0
	if _, err := Open(bg, cfg); err == nil || !strings.Contains(err.Error(), "Config.Retention.Batch:") {
		t.Errorf("Open(Retention.Batch 0, the job running) = %v, want an error naming Config.Retention.Batch", err)
	}
}

func TestTurnLifecycle(t *testing.T) {
	// protoactor's dead-letter throttle goroutine outlives Shutdown (its
	// own, not ours).
	defer goleak.VerifyNone(t, goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewThrottle.func1.1"))
	dir := t.TempDir()
	ev := newEvents()
	hold := make(chan struct{})
	cfg := testConfig(t, dir, ev)
	cfg.Fold = &core.Policy{} // fold every turn as soon as it is finalized
	cfg.Summarize = func(ctx context.Context, prev string, ex []core.Exchange) (string, error) {
		<-hold // summaries wait until the test lets them go
		return core.FallbackSummary(prev, ex), nil
	}
	r := openRuntime(t, cfg)
	_, b, err := r.CreateSession(bg, "test")
	if err != nil {
		t.Fatal(err)
	}
	s1, err := r.Submit(bg, b.ID, "Remember that the deploy target is eu-west-1.")
	if err != nil {
		t.Fatal(err)
	}
	text, last := s1.Wait(nil)
	if !last.Done || last.Phase != messages.PhaseResponseFinalized || !strings.Contains(text, "[local]") {
		t.Fatalf("turn 1 ended %+v with %q", last, text)
	}
	// Summary lag (SRD §22 test 1): turn 1 is not committed yet, so turn 2
	// must see it as a pending turn.
	s2, err := r.Submit(bg, b.ID, "What is the deploy target?")
	if err != nil {
		t.Fatal(err)
	}
	text, last = s2.Wait(nil)
	if !strings.Contains(text, "1 pending turn") || !strings.Contains(text, "Remember that the deploy") {
		t.Fatalf("turn 2 did not see turn 1 as pending: %q", text)
	}
	if _, err := r.Submit(bg, b.ID, ""); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Fatalf("empty message error = %v", err)
	}
	close(hold)
	ev.waitFor(t, "TurnIndexed", 2, isType[messages.TurnIndexed])
	info, err := r.Inspect(bg, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Committed != 2 || info.Indexed != 2 || info.Pending != 0 || info.TurnSeq != 2 {
		t.Fatalf("after two turns: %+v", info)
	}
	if !strings.Contains(info.State.Summary, "eu-west-1") {
		t.Fatalf("summary lost the artifact: %q", info.State.Summary)
	}
	if _, err := r.Pin(bg, b.ID, "The user's name is Ada."); err != nil {
		t.Fatal(err)
	}
	hist, _, err := r.History(bg, b.ID, messages.TurnID{}, 10)
	if err != nil || len(hist) != 4 {
		t.Fatalf("History = %d entries, %v", len(hist), err)
	}
	// Fork after turn 1: the fork's history is turn 1, then its own.
	rows, _ := r.DB().TurnRows(bg, b.ID, 0, 10)
	f, err := r.Fork(bg, b.ID, rows[0].ID, "alt")
	if err != nil {
		t.Fatal(err)
	}
	s3, err := r.Submit(bg, f.ID, "And on the fork?")
	if err != nil {
		t.Fatal(err)
	}
	s3.Wait(nil)
	fh, _, _ := r.History(bg, f.ID, messages.TurnID{}, 10)
	if len(fh) != 4 || fh[0].Message.RenderedText != hist[0].Message.RenderedText || fh[2].Message.RenderedText != "And on the fork?" {
		t.Fatalf("fork history = %+v", fh)
	}
	// EachMessage reads the same transcripts forwards, a page at a time.
	for _, want := range []struct {
		b    messages.BranchID
		hist []Entry
	}{{b.ID, hist}, {f.ID, fh}} {
		for _, page := range []int{0, 1, 3, 4, 10} {
			var got []Entry
			if err := r.EachMessage(bg, want.b, page, func(e Entry) error { got = append(got, e); return nil }); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want.hist) {
				t.Fatalf("EachMessage(page %d) = %d entries, want %d", page, len(got), len(want.hist))
			}
			for i := range got {
				if got[i].Node != want.hist[i].Node || got[i].Depth != want.hist[i].Depth ||
					got[i].Message.RenderedText != want.hist[i].Message.RenderedText {
					t.Fatalf("EachMessage(page %d)[%d] = %+v, want %+v", page, i, got[i], want.hist[i])
				}
			}
		}
	}
	stop, calls := errors.New("stop"), 0
	if err := r.EachMessage(bg, b.ID, 3, func(Entry) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("EachMessage stopped by its fn: %v after %d calls", err, calls)
	}
	// A killed branch actor restarts and replays; its state is intact.
	before, _ := r.Inspect(bg, b.ID)
	if err := r.kill(bg, b.ID); err != nil {
		t.Fatal(err)
	}
	after, err := r.Inspect(bg, b.ID)
	if err != nil || after.State.ID != before.State.ID || after.TurnSeq != before.TurnSeq || len(after.State.Pinned) != 1 {
		t.Fatalf("after kill: %+v, %v; before %+v", after, err, before)
	}
	if r.Restarts() < 1 {
		t.Fatalf("Restarts = %d after a kill", r.Restarts())
	}
	r.Close()
	// Reopen: everything is still there.
	r = openRuntime(t, cfg)
	defer r.Close()
	again, err := r.Inspect(bg, b.ID)
	if err != nil || again.State.ID != before.State.ID || again.Committed != 2 {
		t.Fatalf("after reopen: %+v, %v", again, err)
	}
	s4, err := r.Submit(bg, b.ID, "Still there?")
	if err != nil {
		t.Fatal(err)
	}
	if _, last := s4.Wait(nil); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("turn after reopen: %+v", last)
	}
}

// A branch actor that stops drops the requests still in its mailbox
// unread; callers must learn that and send again, not wait out the
// request timeout. Stops race a stream of requests here.
func TestRequestsSurviveStops(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.RequestTimeout = 20 * time.Second
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, err := r.CreateSession(bg, "stops")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var stopper sync.WaitGroup
	stopper.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = r.Stop(bg, b.ID)
			time.Sleep(time.Millisecond)
		}
	})
	var askers sync.WaitGroup
	var mu sync.Mutex
	var slowest time.Duration
	for range 8 {
		askers.Go(func() {
			for range 50 {
				t0 := time.Now()
				_, err := r.Inspect(bg, b.ID)
				d := time.Since(t0)
				mu.Lock()
				slowest = max(slowest, d)
				mu.Unlock()
				if err != nil && !errors.Is(err, ErrInterrupted) {
					t.Errorf("Inspect during stops: %v", err)
					return
				}
			}
		})
	}
	askers.Wait()
	close(stop)
	stopper.Wait()
	// A dropped request is noticed when the actor terminates, plus a
	// second's grace: far below the 20 s timeout it would otherwise wait.
	if slowest > 10*time.Second {
		t.Errorf("slowest request took %v: a dropped request waited for its timeout", slowest)
	}
}

// A provider call that failed with a server error is retried after its
// Retry-After and the turn completes; the user sees one answer.
func TestProviderRetryEndToEnd(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	limited := &providers.Error{Provider: "fake", StatusCode: 503, Message: "slow down", Retryable: true, RetryAfter: 20 * time.Millisecond}
	f := fake.New(fake.Step{Err: limited}, fake.Step{Reply: "after the wait"})
	cfg.Provider = f
	cfg.Retry = &providers.RetryPolicy{MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: time.Second}
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, err := r.CreateSession(bg, "retry")
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Submit(bg, b.ID, "hello")
	if err != nil {
		t.Fatal(err)
	}
	text, last := s.Wait(nil)
	if last.Phase != messages.PhaseResponseFinalized || text != "after the wait" {
		t.Fatalf("turn ended %s with %q (%s), want finalized with the retried answer", last.Phase, text, last.Err)
	}
	if f.Calls() != 2 {
		t.Errorf("provider calls = %d, want 2", f.Calls())
	}
}

// A submit sent again with its turn id finds that turn; an older turn's
// id is refused without harming the branch.
func TestSubmitIsIdempotentByTurnID(t *testing.T) {
	t.Parallel()
	r := openRuntime(t, testConfig(t, t.TempDir(), newEvents()))
	defer r.Close()
	_, b, err := r.CreateSession(bg, "idempotent")
	if err != nil {
		t.Fatal(err)
	}
	send := func(turn messages.TurnID) (*TurnStream, error) {
		res, err := r.ask(bg, b.ID, &submitReq{msg: messages.NewMessage(messages.RoleUser, messages.Text{Text: "hi"}), turn: turn})
		if err != nil {
			return nil, err
		}
		return res.(*TurnStream), nil
	}
	first := messages.NewID[messages.TurnID](time.Now())
	s, err := send(first)
	if err != nil {
		t.Fatal(err)
	}
	if _, last := s.Wait(nil); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("first turn ended %s", last.Phase)
	}
	again, err := send(first)
	if err != nil {
		t.Fatalf("the same submit again = %v, want its turn", err)
	}
	if _, last := again.Wait(nil); again.Turn != first || last.Phase < messages.PhaseResponseFinalized {
		t.Errorf("resent submit: turn %s ended %s, want turn %s finalized", again.Turn, last.Phase, first)
	}
	second, err := send(messages.NewID[messages.TurnID](time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	second.Wait(nil)
	if _, err := send(first); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Errorf("an older turn's id = %v, want ErrInvalidArgument", err)
	}
	info, err := r.Inspect(bg, b.ID)
	if err != nil || info.TurnSeq != 2 {
		t.Errorf("after the resends: turn seq %d, %v; want 2 turns and a working branch", info.TurnSeq, err)
	}
}
