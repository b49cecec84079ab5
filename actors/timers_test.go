package actors

import (
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// A branch actor idle for Config.IdleAfter passivates, also when it was
// busy (a turn in flight) the first times it looked and when it has
// pending turns; the next request activates it again, turns still
// pending.
func TestBranchPassivatesWhenIdle(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.IdleAfter = 50 * time.Millisecond
	block := make(chan struct{})
	cfg.Provider = fake.New(fake.Step{Reply: "late", Block: block})
	r, b := branchOn(t, cfg)
	s, err := r.Submit(bg, b, "hello")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := r.pid(bg, b)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * cfg.IdleAfter) // busy past several looks
	select {
	case <-r.goneChan(pid):
		t.Fatal("the branch passivated with a turn in flight")
	default:
	}
	close(block)
	if _, last := s.Wait(nil); last.Err != "" {
		t.Fatalf("turn ended %+v", last)
	}
	// Its one turn stays pending (unfolded): that keeps nothing busy.
	if info, err := r.Inspect(bg, b); err != nil || info.Pending != 1 {
		t.Fatalf("Inspect = %+v, %v; want the turn pending", info, err)
	}
	select {
	case <-r.goneChan(pid):
	case <-time.After(10 * time.Second):
		t.Fatal("the branch did not passivate once idle")
	}
	info, err := r.Inspect(bg, b)
	if err != nil || info.TurnSeq != 1 || info.Pending != 1 {
		t.Fatalf("after passivation: Inspect = %+v, %v", info, err)
	}
}

// A step's journal applies its policy's intervals for as long as the
// stream pauses, not once: here its first tick only flushes, and a
// later one fsyncs before the next token comes.
func TestJournalTicksWhileTheStreamPauses(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Journal = persistence.JournalPolicy{FlushInterval: 10 * time.Millisecond, FlushBytes: 1 << 20,
		FsyncInterval: 60 * time.Millisecond}
	cfg.Provider = fake.New(fake.Step{Reply: "one two", Delay: 400 * time.Millisecond})
	r, b := branchOn(t, cfg)
	_, _, updates := runTurn(t, r, b, "hello")
	deltas := 0
	for _, u := range updates {
		if u.Delta != "" {
			deltas++
		}
		if deltas == 1 && u.Delta == "" && !u.Done && u.Durable > 0 && u.Durable == u.Displayed {
			return // fsynced during the pause
		}
	}
	t.Fatalf("no fsync between the first and the second token: %+v", updates)
}

// An idle branch's request to passivate that root reads after the branch
// took a turn (the turn was sent to the PID its caller held) does not cut
// that turn off: the branch stays, is routed to again, and its turn
// answers. A branch still idle when asked stops, and the next turn
// activates it again.
func TestPassivationNeverInterruptsAcceptedWork(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.IdleAfter = time.Hour // the test sends the idle request itself
	block := make(chan struct{})
	cfg.Provider = fake.New(fake.Step{Reply: "late", Block: block}, fake.Step{Reply: "next"}, fake.Step{Reply: "again"})
	r, b := branchOn(t, cfg)
	pid, err := r.pid(bg, b)
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Submit(bg, b, "hello")
	if err != nil {
		t.Fatal(err)
	}
	// As the idle check sends it when it finds the branch idle, just
	// before the turn reached the branch.
	r.sys.Root.Send(r.root, &passivateReq{id: b, pid: pid, ifIdle: true})
	// A request after it waits for the branch to stop or stay, and finds
	// it staying.
	if _, err := r.Inspect(bg, b); err != nil {
		t.Fatal(err)
	}
	close(block)
	if _, last := s.Wait(nil); last.Err != "" {
		t.Fatalf("the accepted turn ended %+v", last)
	}
	if again, err := r.pid(bg, b); err != nil || !again.Equal(pid) {
		t.Fatalf("pid after the cancelled passivation = %v, %v; want %v", again, err, pid)
	}
	if _, last, _ := runTurn(t, r, b, "second"); last.Err != "" {
		t.Fatalf("a turn after the cancelled passivation ended %+v", last)
	}

	// Idle now: asked again, it stops; the next turn activates it.
	r.sys.Root.Send(r.root, &passivateReq{id: b, pid: pid, ifIdle: true})
	select {
	case <-r.goneChan(pid):
	case <-time.After(10 * time.Second):
		t.Fatal("an idle branch asked to passivate did not stop")
	}
	if _, last, _ := runTurn(t, r, b, "third"); last.Err != "" {
		t.Fatalf("a turn after passivation ended %+v", last)
	}
}

// A stopped branch actor is garbage: nothing the runtime keeps (its
// cache of live actors' PIDs, which hold their process) keeps it in
// memory, so a passivated branch costs its rows and nothing else. The
// last actor stopped is left out: root's mailbox may still hold the
// message of its end until the next one.
func TestStoppedBranchActorsAreCollected(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.IdleAfter = time.Hour
	r := openRuntime(t, cfg)
	t.Cleanup(func() { r.Close() })
	const n = 20
	procs := make([]weak.Pointer[actor.ActorProcess], n)
	for i := range n {
		procs[i] = stoppedProcess(t, r)
	}
	stoppedProcess(t, r)
	// An actor's mailbox goroutine may still be on its way out after
	// root saw it terminate: look again for a while.
	live := n
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		runtime.GC()
		live = 0
		for _, p := range procs {
			if p.Value() != nil {
				live++
			}
		}
		if live == 0 {
			return
		}
	}
	t.Fatalf("%d of %d stopped branch actors are still in memory", live, n)
}

// stoppedProcess activates a new session's branch, stops it, waits for
// its actor to terminate and returns a weak pointer to its process.
func stoppedProcess(t *testing.T, r *Runtime) weak.Pointer[actor.ActorProcess] {
	t.Helper()
	_, b, err := r.CreateSession(bg, "stopped")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := r.pid(bg, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := r.sys.ProcessRegistry.Get(pid)
	ap, isActor := p.(*actor.ActorProcess)
	if !ok || !isActor {
		t.Fatalf("branch %s has no actor process (%T)", b.ID, p)
	}
	if err := r.Stop(bg, b.ID); err != nil {
		t.Fatal(err)
	}
	<-r.goneChan(pid)
	return weak.Make(ap)
}
