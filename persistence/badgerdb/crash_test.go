package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

var crashSeed = flag.Uint64("crashseed", 0, "replay TestCrashAcknowledgedAppendsSurvive with this seed (0: a seed from the clock)")

// The crash test's child is this test binary running TestCrashChild with
// these variables set.
const (
	crashDirEnv  = "CTX_CRASH_CHILD_DIR"
	crashSeedEnv = "CTX_CRASH_CHILD_SEED"
	crashRunEnv  = "CTX_CRASH_CHILD_RUN"
)

const (
	crashBranches = 8 // base branches, the same in every run
	crashWriters  = 4 // appending goroutines in the child
	crashMaxForks = 2 // forks per child run
	// crashChildLife bounds a child that is never killed.
	crashChildLife = 20 * time.Second
)

// crashBaseBranches returns the ids of the base branches of a crash test
// seed; the parent and every child derive the same ones.
func crashBaseBranches(seed uint64) []messages.BranchID {
	r := rand.New(rand.NewPCG(seed, 0xc4a5b))
	ids := make([]messages.BranchID, crashBranches)
	for i := range ids {
		binary.BigEndian.PutUint64(ids[i][:8], r.Uint64())
		binary.BigEndian.PutUint64(ids[i][8:], r.Uint64()|1) // never zero
	}
	return ids
}

// crashPayload returns the payload of the n-th append to branch b in run
// run: 100 B to 30 KB, random or repetitive, one in four shared by every
// branch and run so that they deduplicate.
func crashPayload(b messages.BranchID, run, n uint64) []byte {
	var r *rand.Rand
	if n%4 == 3 {
		r = rand.New(rand.NewPCG(n%16, 0x5eed))
	} else {
		r = rand.New(rand.NewPCG(binary.BigEndian.Uint64(b[8:])^n, run))
	}
	p := make([]byte, 100+r.IntN(30_000-100+1))
	if r.IntN(2) == 0 {
		for i := range p {
			p[i] = byte(r.Uint32())
		}
	} else {
		fill := fmt.Appendf(nil, "branch %s append %d; ", b, n)
		for i := range p {
			p[i] = fill[i%len(fill)]
		}
	}
	return p
}

// TestCrashChild is the child process of TestCrashAcknowledgedAppendsSurvive.
// It appends until it is killed, printing one ACK line per acknowledged
// append, and never returns.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestCrashAcknowledgedAppendsSurvive")
	}
	seed, err1 := strconv.ParseUint(os.Getenv(crashSeedEnv), 10, 64)
	run, err2 := strconv.ParseUint(os.Getenv(crashRunEnv), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintf(os.Stderr, "crash child: bad environment: %v\n", err)
		os.Exit(2)
	}
	if err := crashChild(dir, seed, run); err != nil {
		fmt.Fprintf(os.Stderr, "crash child: %v\n", err)
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "crash child: not killed in time")
	os.Exit(3)
}

// crashOut writes whole lines to stdout, one write each, so that a kill
// never leaves half a line behind a whole one.
type crashOut struct {
	mu  sync.Mutex
	buf []byte
}

func (o *crashOut) printf(format string, args ...any) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = fmt.Appendf(o.buf[:0], format, args...)
	_, err := os.Stdout.Write(o.buf)
	return err
}

// crashChild opens the store in dir, creates the base branches if they are
// missing, prints READY and appends from several goroutines until one
// fails or crashChildLife passes.
func crashChild(dir string, seed, run uint64) error {
	o := TestOptions(dir)
	o.Durability = persistence.DurabilitySync
	s, err := OpenBadger(o)
	if err != nil {
		return err
	}
	ctx := context.Background()
	base := crashBaseBranches(seed)
	for _, b := range base {
		if _, err := s.CreateBranch(ctx, persistence.BranchSpec{ID: b}); err != nil && !errors.Is(err, persistence.ErrBranchExists) {
			return fmt.Errorf("create branch %s: %w", b, err)
		}
	}
	out := &crashOut{}
	if err := out.printf("READY\n"); err != nil {
		return err
	}

	var (
		mu       sync.Mutex
		branches = append([]messages.BranchID(nil), base...)
		seqs     = make(map[messages.BranchID]uint64)
		forks    atomic.Int32
	)
	next := func(r *rand.Rand) (messages.BranchID, uint64) {
		mu.Lock()
		defer mu.Unlock()
		b := branches[r.IntN(len(branches))]
		seqs[b]++
		return b, seqs[b]
	}
	fork := func(r *rand.Rand) error {
		b, _ := next(r)
		p, err := s.Last(ctx, b, 30)
		if err != nil || len(p.Nodes) == 0 {
			return err
		}
		at := p.Nodes[r.IntN(len(p.Nodes))]
		h, err := s.CreateBranch(ctx, persistence.BranchSpec{At: at.ID})
		if err != nil {
			return fmt.Errorf("fork %s at %s: %w", b, at.ID, err)
		}
		if err := out.printf("FORK %s %s %d\n", h.Branch, at.ID, at.Depth); err != nil {
			return err
		}
		mu.Lock()
		branches = append(branches, h.Branch)
		mu.Unlock()
		return nil
	}
	appendOne := func(r *rand.Rand) error {
		b, n := next(r)
		req := persistence.AppendRequest{Payload: crashPayload(b, run, n), TypeTag: n}
		if r.IntN(4) == 0 {
			h, err := s.Head(ctx, b)
			if err != nil {
				return fmt.Errorf("head of %s: %w", b, err)
			}
			req.ExpectParent = &h.Node
		}
		t, err := s.Append(ctx, b, req)
		if errors.Is(err, persistence.ErrHeadMismatch) && req.ExpectParent != nil {
			return nil // another writer moved the head
		}
		if err != nil {
			return fmt.Errorf("append to %s: %w", b, err)
		}
		if h := persistence.HashOf(req.Payload); t.PayloadHash != h {
			return fmt.Errorf("append to %s returned payload hash %s, want %s", b, t.PayloadHash, h)
		}
		return out.printf("ACK %s %s %d %s\n", b, t.ID, t.Depth, t.PayloadHash)
	}

	errc := make(chan error, crashWriters)
	for g := range crashWriters {
		go func() {
			r := rand.New(rand.NewPCG(seed^run, uint64(g)))
			for {
				var err error
				if r.IntN(50) == 0 && forks.Add(1) <= crashMaxForks {
					err = fork(r)
				} else {
					err = appendOne(r)
				}
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	select {
	case err := <-errc:
		return err
	case <-time.After(crashChildLife):
		return nil
	}
}

// crashAck is an acknowledged append as the child reported it.
type crashAck struct {
	branch messages.BranchID
	turn   messages.TurnID
	depth  uint64
	hash   persistence.Hash
	run    int
}

// crashFork is an acknowledged fork.
type crashFork struct {
	branch messages.BranchID
	at     messages.TurnID
	depth  uint64
}

func parseCrashLine(line string) (ack *crashAck, fork *crashFork, err error) {
	f := strings.Fields(line)
	switch {
	case len(f) == 5 && f[0] == "ACK":
		a := &crashAck{}
		var errs [4]error
		a.branch, errs[0] = messages.ParseID[messages.BranchID](f[1])
		a.turn, errs[1] = messages.ParseID[messages.TurnID](f[2])
		a.depth, errs[2] = strconv.ParseUint(f[3], 10, 64)
		a.hash, errs[3] = persistence.ParseHash(f[4])
		return a, nil, errors.Join(errs[:]...)
	case len(f) == 4 && f[0] == "FORK":
		k := &crashFork{}
		var errs [3]error
		k.branch, errs[0] = messages.ParseID[messages.BranchID](f[1])
		k.at, errs[1] = messages.ParseID[messages.TurnID](f[2])
		k.depth, errs[2] = strconv.ParseUint(f[3], 10, 64)
		return nil, k, errors.Join(errs[:]...)
	}
	return nil, nil, fmt.Errorf("unexpected line %q", line)
}

// crashState is what the parent knows: every acknowledged append and fork
// so far, and the heads it verified after the last kill.
type crashState struct {
	branches []messages.BranchID // base, then acknowledged forks
	known    map[messages.BranchID]bool
	forks    map[messages.BranchID]crashFork
	acks     []crashAck
	heads    map[messages.BranchID]persistence.Head // verified after the previous run
}

// TestCrashAcknowledgedAppendsSurvive runs a child process that appends to
// a store from several goroutines, SIGKILLs it at a seeded random moment,
// reopens the store and checks that every acknowledged append survived on
// its branch and every head is valid; then it runs the next child on the
// same directory. Replay a failure with -crashseed.
func TestCrashAcknowledgedAppendsSurvive(t *testing.T) {
	if os.Getenv(crashDirEnv) != "" {
		t.Skip("this is the crash child")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("cannot re-execute the test binary: %v", err)
	}
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("crash seed %d (replay: go test ./persistence -run TestCrashAcknowledgedAppendsSurvive -crashseed=%d)", seed, seed)
	runs := 20
	if testing.Short() {
		runs = 5
	}
	rng := rand.New(rand.NewPCG(seed, 0x6b11))
	dir := t.TempDir()
	st := &crashState{
		branches: crashBaseBranches(seed),
		known:    make(map[messages.BranchID]bool),
		forks:    make(map[messages.BranchID]crashFork),
		heads:    make(map[messages.BranchID]persistence.Head),
	}
	for _, b := range st.branches {
		st.known[b] = true
	}
	for run := range runs {
		delay := time.Duration(20+rng.IntN(381)) * time.Millisecond
		before := len(st.acks)
		late := runCrashChild(t, exe, dir, seed, run, delay, st)
		t.Logf("run %d: killed %v after READY; %d appends acknowledged (%d lines read after the kill), %d forks so far",
			run, delay, len(st.acks)-before, late, len(st.forks))
		verifyCrashState(t, dir, run, st)
	}
}

// runCrashChild runs one child on dir, kills it delay after it is ready,
// and records the appends and forks it acknowledged. It returns how many
// lines were read after the kill.
func runCrashChild(t *testing.T, exe, dir string, seed uint64, run int, delay time.Duration, st *crashState) (late int) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(exe, "-test.run=^TestCrashChild$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(),
		crashDirEnv+"="+dir,
		crashSeedEnv+"="+strconv.FormatUint(seed, 10),
		crashRunEnv+"="+strconv.Itoa(run))
	cmd.Stdout = pw
	cmd.Stderr = &stderr
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		pw.Close()
		t.Fatalf("start crash child: %v", err)
	}
	pw.Close() // the child holds the only write end now
	killed := false
	defer func() {
		if !killed { // a failure below: do not leave the child running
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()

	// The reader stops at EOF, which comes when the child dies, or when
	// stop is closed.
	lines := make(chan string, 256)
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	defer func() {
		close(stop)
		pr.Close()
		<-readerDone
	}()
	go func() {
		defer close(readerDone)
		defer close(lines)
		br := bufio.NewReader(pr)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return // a partial last line is not an acknowledgement
			}
			select {
			case lines <- strings.TrimSuffix(line, "\n"):
			case <-stop:
				return
			}
		}
	}()
	fail := func(format string, args ...any) {
		t.Helper()
		cmd.Process.Kill()
		cmd.Wait()
		killed = true
		t.Fatalf("run %d: %s; child stderr:\n%s", run, fmt.Sprintf(format, args...), stderr.String())
	}
	handle := func(line string) {
		t.Helper()
		ack, fork, err := parseCrashLine(line)
		if err != nil {
			fail("child said %q: %v", line, err)
		}
		switch {
		case ack != nil:
			if !st.known[ack.branch] {
				fail("child acknowledged an append to unknown branch %s", ack.branch)
			}
			ack.run = run
			st.acks = append(st.acks, *ack)
		case fork != nil:
			st.known[fork.branch] = true
			st.branches = append(st.branches, fork.branch)
			st.forks[fork.branch] = *fork
		}
	}

	ready := time.NewTimer(60 * time.Second)
	defer ready.Stop()
	select {
	case line, ok := <-lines:
		if !ok || line != "READY" {
			fail("child printed %q (open %v) instead of READY", line, ok)
		}
	case <-ready.C:
		fail("child not READY after 60s")
	}
	kill := time.NewTimer(delay)
	defer kill.Stop()
	for !killed {
		select {
		case line, ok := <-lines:
			if !ok {
				fail("child exited before it was killed")
			}
			handle(line)
		case <-kill.C:
			if err := cmd.Process.Kill(); err != nil {
				fail("kill: %v", err)
			}
			killed = true
		}
	}
	// Lines still in the pipe were written after their appends returned,
	// so they are acknowledgements too.
	drain := time.NewTimer(10 * time.Second)
	defer drain.Stop()
	for open := true; open; {
		select {
		case line, ok := <-lines:
			if open = ok; ok {
				handle(line)
				late++
			}
		case <-drain.C:
			fail("child's stdout still open 10s after the kill")
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Exited() {
		fail("child ended with %v, want killed by a signal", err)
	}
	if bytes.Contains(stderr.Bytes(), []byte("DATA RACE")) {
		fail("the race detector reported a race in the child")
	}
	return late
}

// verifyCrashState reopens the store after a kill and checks it against
// every acknowledgement so far.
func verifyCrashState(t *testing.T, dir string, run int, st *crashState) {
	t.Helper()
	ctx := t.Context()
	o := TestOptions(dir)
	o.Durability = persistence.DurabilitySync
	s, err := OpenBadger(o)
	if err != nil {
		t.Fatalf("run %d: reopen after kill: %v", run, err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("run %d: close: %v", run, err)
		}
	}()
	fatalf := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("run %d: %s", run, fmt.Sprintf(format, args...))
	}

	// Every head is valid: its chain runs from a root at depth 0 with
	// consecutive depths, and it extends the head seen after the last run.
	onChain := make(map[messages.BranchID]map[messages.TurnID]uint64, len(st.branches))
	heads := make(map[messages.BranchID]persistence.Head, len(st.branches))
	for _, b := range st.branches {
		h, err := s.Head(ctx, b)
		if err != nil {
			fatalf("Head(%s) = %v", b, err)
		}
		heads[b] = h
		ids := make(map[messages.TurnID]uint64)
		onChain[b] = ids
		if h.Empty() {
			if h.Depth != 0 {
				fatalf("empty branch %s has depth %d", b, h.Depth)
			}
		} else {
			if tn, err := s.Node(ctx, h.Node); err != nil || tn.Depth != h.Depth {
				fatalf("branch %s: Turn(head %s at depth %d) = depth %d, %v", b, h.Node, h.Depth, tn.Depth, err)
			}
			chain, err := s.Chain(ctx, h.Node)
			if err != nil {
				fatalf("Chain(head %s of %s) = %v", h.Node, b, err)
			}
			if uint64(len(chain)) != h.Depth+1 || chain[len(chain)-1].ID != h.Node {
				fatalf("Chain(head %s of %s at depth %d) has %d turns, ending at %s", h.Node, b, h.Depth, len(chain), chain[len(chain)-1].ID)
			}
			var parent messages.NodeID
			for i, tn := range chain {
				if tn.Depth != uint64(i) || tn.Parent != parent {
					fatalf("branch %s: turn %d of the chain is %s at depth %d with parent %q, want depth %d and parent %q",
						b, i, tn.ID, tn.Depth, tn.Parent, i, parent)
				}
				parent = tn.ID
				ids[tn.ID] = tn.Depth
			}
			// The newest turns' payloads are readable too.
			for _, tn := range chain[max(0, len(chain)-4):] {
				if _, err := s.Blob(ctx, tn.PayloadHash); err != nil {
					fatalf("branch %s: Blob of turn %s at depth %d = %v", b, tn.ID, tn.Depth, err)
				}
			}
		}
		if prev, ok := st.heads[b]; ok && !prev.Empty() {
			if d, ok := ids[prev.Node]; !ok || d != prev.Depth {
				fatalf("branch %s: head %s at depth %d is not on the chain of the previous head %s at depth %d",
					b, h.Node, h.Depth, prev.Node, prev.Depth)
			}
		}
		if f, ok := st.forks[b]; ok {
			if d, ok := ids[f.at]; !ok || d != f.depth || h.Base != f.at {
				fatalf("fork %s at %s (depth %d): head %+v does not descend from its base", b, f.at, f.depth, h)
			}
		}
	}

	// Every acknowledged append is on its branch's chain at its depth; the
	// ones of this run are read back in full.
	maxDepth := make(map[messages.BranchID]uint64)
	for _, a := range st.acks {
		if d, ok := onChain[a.branch][a.turn]; !ok || d != a.depth {
			fatalf("turn %s acknowledged in run %d at depth %d on %s is not on the chain of head %s at depth %d",
				a.turn, a.run, a.depth, a.branch, heads[a.branch].Node, heads[a.branch].Depth)
		}
		maxDepth[a.branch] = max(maxDepth[a.branch], a.depth)
		if a.run != run {
			continue
		}
		tn, err := s.Node(ctx, a.turn)
		if err != nil {
			fatalf("Turn(%s) acknowledged on %s = %v", a.turn, a.branch, err)
		}
		if tn.Depth != a.depth || tn.PayloadHash != a.hash {
			fatalf("Turn(%s) = depth %d, payload %s; acknowledged depth %d, payload %s", a.turn, tn.Depth, tn.PayloadHash, a.depth, a.hash)
		}
		p, err := s.Blob(ctx, a.hash)
		if err != nil {
			fatalf("Blob(%s) of acknowledged turn %s = %v", a.hash, a.turn, err)
		}
		if persistence.HashOf(p) != a.hash {
			fatalf("Blob(%s) of acknowledged turn %s hashes to %s", a.hash, a.turn, persistence.HashOf(p))
		}
	}
	for b, d := range maxDepth {
		if heads[b].Depth < d || heads[b].Empty() {
			fatalf("branch %s: head depth %d is below the deepest acknowledged append, %d", b, heads[b].Depth, d)
		}
	}
	st.heads = heads
}
