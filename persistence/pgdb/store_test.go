package pgdb

import (
	"bufio"
	"context"
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

	"github.com/jackc/pgx/v5"

	"github.com/contextinfinity/ctxinf/internal/pgtest"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// The PostgreSQL store's own tests: what the shared tests cannot show,
// several stores (runtimes) on one database, connections that break, and
// a process killed mid-write.

func openPG(t testing.TB, url string) *pgStore {
	t.Helper()
	o := DefaultPGOptions(url)
	o.Limits.MaxPayloadBytes = 1 << 20
	s, err := openPostgres(bg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// pgExec runs one statement on its own connection.
func pgExec(t testing.TB, url, sql string, args ...any) {
	t.Helper()
	c, err := pgx.Connect(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(bg)
	if _, err := c.Exec(bg, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// pgCount returns the single integer sql selects.
func pgCount(t testing.TB, url, sql string, args ...any) int64 {
	t.Helper()
	c, err := pgx.Connect(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(bg)
	var n int64
	if err := c.QueryRow(bg, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// killBackend ends the server process behind tx's connection and waits
// until it is gone.
func killBackend(t testing.TB, url string, tx pgx.Tx) {
	t.Helper()
	pgExec(t, url, "SELECT pg_terminate_backend($1, 10000)", int32(tx.Conn().PgConn().PID()))
}

// checkPGStore checks what must hold in any state a crash, a broken
// connection or a lost race leaves: every turn is on the chain of some
// head (no turn was written without its head moving), every blob is
// referenced exactly as many times as turns use it, and every turn's blob
// is there. It returns every turn on every branch's chain, by branch.
func checkPGStore(t *testing.T, url string, s persistence.Store) map[messages.BranchID]map[messages.TurnID]bool {
	t.Helper()
	c, err := pgx.Connect(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(bg)
	rows, err := c.Query(bg, "SELECT branch FROM ctx_heads")
	if err != nil {
		t.Fatal(err)
	}
	var branches []messages.BranchID
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		branches = append(branches, messages.BranchID(b))
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	chains := make(map[messages.BranchID]map[messages.NodeID]bool)
	all := make(map[messages.TurnID]bool)
	for _, b := range branches {
		h, err := s.Head(bg, b)
		if err != nil {
			t.Fatal(err)
		}
		chains[b] = make(map[messages.NodeID]bool)
		if h.Empty() {
			continue
		}
		ts, err := s.Chain(bg, h.Node)
		if err != nil {
			t.Fatalf("Chain(head of %s): %v", b, err)
		}
		if uint64(len(ts)) != h.Len() {
			t.Fatalf("branch %s: chain of %d turns, head says %d", b, len(ts), h.Len())
		}
		for _, tr := range ts {
			chains[b][tr.ID] = true
			all[tr.ID] = true
		}
	}
	var n int64
	if err := c.QueryRow(bg, "SELECT count(*) FROM ctx_turns").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != int64(len(all)) {
		t.Fatalf("%d turns stored, %d on the chains of heads: a turn was written without its head", n, len(all))
	}
	if err := c.QueryRow(bg, `SELECT count(*) FROM ctx_blobs b
		WHERE b.refs <> (SELECT count(*) FROM ctx_turns t WHERE t.hash = b.hash)
			+ (SELECT count(*) FROM ctx_overlays o WHERE o.hash = b.hash)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d blobs have a reference count other than the turns and overlays that use them", n)
	}
	if err := c.QueryRow(bg, `SELECT count(*) FROM ctx_turns t
		WHERE NOT EXISTS (SELECT 1 FROM ctx_blobs b WHERE b.hash = t.hash)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d turns name a blob that is not stored", n)
	}
	return chains
}

// TestPostgresStaleHeadRejected: two stores on one database (two
// activations of one branch) append concurrently, all expecting the same
// parent. Exactly one append commits; every other gets ErrHeadMismatch and
// leaves nothing behind.
func TestPostgresStaleHeadRejected(t *testing.T) {
	url := pgtest.Start(t)
	a, b := openPG(t, url), openPG(t, url)
	h, err := a.CreateBranch(bg, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t0, err := a.Append(bg, h.Branch, persistence.AppendRequest{Payload: []byte("root")})
	if err != nil {
		t.Fatal(err)
	}
	const writers = 16
	var wg sync.WaitGroup
	var won atomic.Int32
	errs := make(chan error, writers)
	var winner atomic.Pointer[persistence.Node]
	for w := range writers {
		s := a
		if w%2 == 1 {
			s = b
		}
		wg.Go(func() {
			tr, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: fmt.Appendf(nil, "writer %d", w), ExpectParent: &t0.ID})
			switch {
			case err == nil:
				won.Add(1)
				winner.Store(&tr)
			case !errors.Is(err, persistence.ErrHeadMismatch):
				errs <- fmt.Errorf("writer %d: %w", w, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if won.Load() != 1 {
		t.Fatalf("%d appends with the same expected parent committed, want exactly 1", won.Load())
	}
	got, err := b.Head(bg, h.Branch)
	if err != nil || got.Node != winner.Load().ID || got.Depth != 1 {
		t.Fatalf("head = %+v, %v, want the winner %s at depth 1", got, err, winner.Load().ID)
	}
	if n := pgCount(t, url, "SELECT count(*) FROM ctx_turns"); n != 2 {
		t.Fatalf("%d turns stored, want 2 (the root and the winner)", n)
	}
	for w := range writers {
		p := fmt.Appendf(nil, "writer %d", w)
		refs, err := a.BlobRefs(bg, persistence.HashOf(p))
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(0); persistence.HashOf(p) == winner.Load().PayloadHash {
			want = 1
			if refs != want {
				t.Fatalf("the winner's blob has %d references, want 1", refs)
			}
		} else if refs != 0 {
			t.Fatalf("writer %d lost but its blob has %d references", w, refs)
		}
	}
	checkPGStore(t, url, a)
}

// TestPostgresSerializationRetry: store A reads a head; before A writes,
// store B moves it. A's transaction fails (40001, or its compare-and-swap
// matches no row) and is retried whole: without ExpectParent A appends
// after B's turn, with ExpectParent it gets ErrHeadMismatch and writes
// nothing.
func TestPostgresSerializationRetry(t *testing.T) {
	for _, expect := range []bool{false, true} {
		t.Run(fmt.Sprintf("expect=%v", expect), func(t *testing.T) {
			url := pgtest.Start(t)
			a, b := openPG(t, url), openPG(t, url)
			h, _ := a.CreateBranch(bg, persistence.BranchSpec{})
			t0, err := a.Append(bg, h.Branch, persistence.AppendRequest{Payload: []byte("root")})
			if err != nil {
				t.Fatal(err)
			}
			var bTurn persistence.Node
			var hookErr error
			a.testHook = func(stage string, attempt int, tx pgx.Tx) {
				if stage == "read" && attempt == 0 {
					bTurn, hookErr = b.Append(bg, h.Branch, persistence.AppendRequest{Payload: []byte("b")})
				}
			}
			req := persistence.AppendRequest{Payload: []byte("a")}
			if expect {
				req.ExpectParent = &t0.ID
			}
			aTurn, err := a.Append(bg, h.Branch, req)
			if hookErr != nil {
				t.Fatal(hookErr)
			}
			if a.Stats().Retries == 0 {
				t.Fatal("A's transaction was not retried after B moved the head it read")
			}
			c, err2 := a.Last(bg, h.Branch, 10)
			if err2 != nil {
				t.Fatal(err2)
			}
			if expect {
				if !errors.Is(err, persistence.ErrHeadMismatch) {
					t.Fatalf("A's append expecting the stale parent = %v, want ErrHeadMismatch", err)
				}
				sameIDs(t, "chain", c.Nodes, []persistence.Node{t0, bTurn})
				if n, _ := a.BlobRefs(bg, persistence.HashOf([]byte("a"))); n != 0 {
					t.Fatalf("A's rejected payload has %d references", n)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if aTurn.Parent != bTurn.ID || aTurn.Depth != 2 {
					t.Fatalf("A's turn = parent %s depth %d, want parent %s (B's) depth 2", aTurn.Parent, aTurn.Depth, bTurn.ID)
				}
				sameIDs(t, "chain", c.Nodes, []persistence.Node{t0, bTurn, aTurn})
			}
			checkPGStore(t, url, a)
		})
	}
}

// TestPostgresConnectionLost breaks the committer's connection inside a
// group's transaction. Before the writes, the group is retried on another
// connection and acknowledged once; just before COMMIT, its writer is told
// ErrOutcomeUnknown and, since the server never committed it, nothing of
// it is stored. The store goes on working either way.
func TestPostgresConnectionLost(t *testing.T) {
	for _, stage := range []string{"read", "commit"} {
		t.Run("stage="+stage, func(t *testing.T) {
			url := pgtest.Start(t)
			s := openPG(t, url)
			h, _ := s.CreateBranch(bg, persistence.BranchSpec{})
			t0, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: []byte("root")})
			if err != nil {
				t.Fatal(err)
			}
			killed := false
			s.testHook = func(st string, attempt int, tx pgx.Tx) {
				if st == stage && !killed {
					killed = true
					killBackend(t, url, tx)
				}
			}
			before := s.Stats()
			tr, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: []byte("during the kill")})
			if !killed {
				t.Fatal("the hook did not run")
			}
			got, _ := s.Head(bg, h.Branch)
			switch stage {
			case "read":
				if err != nil {
					t.Fatalf("append retried after the connection broke = %v", err)
				}
				if s.Stats().Retries == before.Retries {
					t.Fatal("no retry counted")
				}
				if got.Node != tr.ID || got.Depth != 1 {
					t.Fatalf("head = %+v, want the retried append %s", got, tr.ID)
				}
			case "commit":
				if !errors.Is(err, ErrOutcomeUnknown) {
					t.Fatalf("append whose COMMIT lost its connection = %v, want ErrOutcomeUnknown", err)
				}
				if got.Node != t0.ID {
					t.Fatalf("head = %+v, want it still at the root", got)
				}
				if n, _ := s.BlobRefs(bg, persistence.HashOf([]byte("during the kill"))); n != 0 {
					t.Fatalf("the uncommitted payload has %d references", n)
				}
			}
			if n := pgCount(t, url, "SELECT count(*) FROM ctx_turns"); n != int64(got.Len()) {
				t.Fatalf("%d turns stored, want %d: an append was stored twice or partly", n, got.Len())
			}
			// The store goes on, on a new connection.
			s.testHook = nil
			next, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: []byte("after")})
			if err != nil || next.Parent != got.Node {
				t.Fatalf("append after the kill = %+v, %v, want a child of %s", next, err, got.Node)
			}
			checkPGStore(t, url, s)
		})
	}
}

// TestPostgresGroupCommit: while the committer is held inside one group,
// the appends of 31 other writers queue up; they are then committed in
// one transaction, not 31.
func TestPostgresGroupCommit(t *testing.T) {
	url := pgtest.Start(t)
	s := openPG(t, url)
	const writers = 32
	heads := make([]persistence.Head, writers)
	for i := range heads {
		var err error
		if heads[i], err = s.CreateBranch(bg, persistence.BranchSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	first := make(chan struct{})
	var once sync.Once
	s.testHook = func(stage string, attempt int, tx pgx.Tx) {
		if stage != "commit" {
			return
		}
		once.Do(func() {
			close(first)
			// Hold this group until every other writer's append waits.
			deadline := time.Now().Add(30 * time.Second)
			for s.ops.Len() < writers-1 {
				if time.Now().After(deadline) {
					t.Errorf("only %d appends queued behind the first group", s.ops.Len())
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	before := s.Stats()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	wg.Go(func() {
		_, err := s.Append(bg, heads[0].Branch, persistence.AppendRequest{Payload: []byte("first")})
		errs <- err
	})
	<-first // the first group is in the committer: the rest queue
	for w := 1; w < writers; w++ {
		wg.Go(func() {
			_, err := s.Append(bg, heads[w].Branch, persistence.AppendRequest{Payload: fmt.Appendf(nil, "w%d", w)})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	after := s.Stats()
	appends, groups := after.Appends-before.Appends, after.Groups-before.Groups
	if appends != writers || groups != 2 {
		t.Fatalf("%d appends in %d groups, want %d in 2", appends, groups, writers)
	}
	checkPGStore(t, url, s)
}

// TestPostgresConcurrentAppends: many writers on their own branches and
// on one shared branch, through two stores, some with the same payloads;
// every acknowledged append is on its branch, once, and every blob is
// counted exactly.
func TestPostgresConcurrentAppends(t *testing.T) {
	url := pgtest.Start(t)
	a, b := openPG(t, url), openPG(t, url)
	shared, _ := a.CreateBranch(bg, persistence.BranchSpec{})
	const writers, each = 8, 15
	var mu sync.Mutex
	acked := make(map[messages.BranchID][]messages.TurnID)
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for w := range writers {
		s := a
		if w%2 == 1 {
			s = b
		}
		wg.Go(func() {
			h, err := s.CreateBranch(bg, persistence.BranchSpec{})
			for i := 0; err == nil && i < each; i++ {
				var tr persistence.Node
				// Some payloads are the same for every writer of both
				// stores: their blob rows are raced for.
				p := fmt.Appendf(nil, "%d/%d", w, i%4)
				if i%3 == 0 {
					p = fmt.Appendf(nil, "common %d", i%2)
				}
				if tr, err = s.Append(bg, h.Branch, persistence.AppendRequest{Payload: p}); err == nil {
					mu.Lock()
					acked[h.Branch] = append(acked[h.Branch], tr.ID)
					mu.Unlock()
				}
			}
			errs <- err
		})
		wg.Go(func() {
			var err error
			for i := 0; err == nil && i < each; i++ {
				var tr persistence.Node
				if tr, err = s.Append(bg, shared.Branch, persistence.AppendRequest{Payload: fmt.Appendf(nil, "shared %d/%d", w, i)}); err == nil {
					mu.Lock()
					acked[shared.Branch] = append(acked[shared.Branch], tr.ID)
					mu.Unlock()
				}
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	chains := checkPGStore(t, url, a)
	for br, ids := range acked {
		if len(chains[br]) != len(ids) {
			t.Fatalf("branch %s: %d turns on the chain, %d acknowledged", br, len(chains[br]), len(ids))
		}
		for _, id := range ids {
			if !chains[br][id] {
				t.Fatalf("acknowledged turn %s is not on branch %s", id, br)
			}
		}
	}
	t.Logf("stats A: %+v; B: %+v", a.Stats(), b.Stats())
}

// TestPostgresCloseMidGroup closes the store while writers append: every
// acknowledged append is there after a reopen, every other one got an
// error, and nothing is half written.
func TestPostgresCloseMidGroup(t *testing.T) {
	url := pgtest.Start(t)
	o := DefaultPGOptions(url)
	s, err := OpenPostgres(bg, o)
	if err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var mu sync.Mutex
	acked := make(map[messages.BranchID][]messages.TurnID)
	var total atomic.Int32
	enough := make(chan struct{})
	var enoughOnce sync.Once
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			h, err := s.CreateBranch(bg, persistence.BranchSpec{})
			for i := 0; err == nil; i++ {
				var tr persistence.Node
				if tr, err = s.Append(bg, h.Branch, persistence.AppendRequest{Payload: fmt.Appendf(nil, "%d/%d", w, i)}); err == nil {
					mu.Lock()
					acked[h.Branch] = append(acked[h.Branch], tr.ID)
					mu.Unlock()
					if total.Add(1) >= 100 {
						enoughOnce.Do(func() { close(enough) })
					}
				}
			}
			if !errors.Is(err, persistence.ErrClosed) {
				t.Errorf("writer %d: %v, want ErrClosed", w, err)
			}
		})
	}
	<-enough
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	s2 := openPG(t, url)
	chains := checkPGStore(t, url, s2)
	for br, ids := range acked {
		if len(chains[br]) != len(ids) {
			t.Fatalf("branch %s: %d turns stored, %d acknowledged", br, len(chains[br]), len(ids))
		}
		for _, id := range ids {
			if !chains[br][id] {
				t.Fatalf("acknowledged turn %s of branch %s is missing after Close", id, br)
			}
		}
	}
}

// The crash test's child: this test binary running TestPostgresCrashChild
// with these set.
const (
	pgCrashURLEnv = "CTX_PG_CRASH_URL"
	pgCrashRunEnv = "CTX_PG_CRASH_RUN"
)

var crashSeed = flag.Uint64("crashseed", 0, "replay TestPostgresCrashAcknowledgedSurvive with this seed (0: a seed from the clock)")

const (
	crashWriters = 4 // appending goroutines in the child
	// crashChildLife bounds a child that is never killed.
	crashChildLife = 20 * time.Second
)

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

// TestPostgresCrashChild appends on the branches it is given (creating
// them in run 0) from several goroutines, printing "ACK branch turn" for
// each acknowledged append, until it is killed.
func TestPostgresCrashChild(t *testing.T) {
	url := os.Getenv(pgCrashURLEnv)
	if url == "" {
		t.Skip("runs only as the child of TestPostgresCrashAcknowledgedSurvive")
	}
	run, _ := strconv.Atoi(os.Getenv(pgCrashRunEnv))
	s, err := OpenPostgres(bg, DefaultPGOptions(url))
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	var out crashOut
	ctx, cancel := context.WithTimeout(bg, crashChildLife)
	defer cancel()
	var wg sync.WaitGroup
	for w := range crashWriters {
		id := messages.BranchID{byte(w + 1)}
		if run == 0 {
			if _, err := s.CreateBranch(ctx, persistence.BranchSpec{ID: id}); err != nil {
				fmt.Fprintln(os.Stderr, "crash child:", err)
				os.Exit(2)
			}
		}
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				p := fmt.Appendf(nil, "run %d writer %d append %d %s", run, w, i, strings.Repeat("x", i%7*300))
				tr, err := s.Append(ctx, id, persistence.AppendRequest{Payload: p})
				if err != nil {
					fmt.Fprintln(os.Stderr, "crash child:", err)
					os.Exit(2)
				}
				out.printf("ACK %s %s\n", id, tr.ID)
			}
		})
	}
	out.printf("READY\n")
	wg.Wait()
	fmt.Fprintln(os.Stderr, "crash child: not killed in time")
	os.Exit(3)
}

// TestPostgresCrashAcknowledgedSurvive kills a process that appends
// through the PostgreSQL store (SIGKILL, after a seeded number of
// acknowledgements), three times over: every acknowledged append is
// there, and a transaction cut short by the kill is there whole or not at
// all.
func TestPostgresCrashAcknowledgedSurvive(t *testing.T) {
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: -run TestPostgresCrashAcknowledgedSurvive -crashseed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 27))
	url := pgtest.Start(t)
	acked := make(map[messages.BranchID][]messages.TurnID)
	for run := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPostgresCrashChild$")
		cmd.Env = append(os.Environ(), pgCrashURLEnv+"="+url, pgCrashRunEnv+"="+strconv.Itoa(run))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAt := 20 + rng.IntN(200)
		sc := bufio.NewScanner(stdout)
		n := 0
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 || f[0] != "ACK" {
				continue
			}
			br, err1 := messages.ParseID[messages.BranchID](f[1])
			tr, err2 := messages.ParseID[messages.TurnID](f[2])
			if err := errors.Join(err1, err2); err != nil {
				t.Fatalf("child printed %q: %v", sc.Text(), err)
			}
			acked[br] = append(acked[br], tr)
			if n++; n == killAt {
				cmd.Process.Kill()
			}
		}
		cmd.Wait()
		if n < killAt {
			t.Fatalf("run %d: the child ended after %d acknowledgements, before the kill at %d:\n%s", run, n, killAt, stderr.String())
		}
		// What the child printed between the kill and its death is
		// acknowledged too; all of it must be there.
		s := openPG(t, url)
		chains := checkPGStore(t, url, s)
		for br, ids := range acked {
			for _, id := range ids {
				if !chains[br][id] {
					t.Fatalf("run %d: acknowledged turn %s of branch %s is missing after the kill", run, id, br)
				}
			}
		}
		s.Close()
		t.Logf("run %d: killed after %d acknowledgements; %d turns stored", run, n, pgCount(t, url, "SELECT count(*) FROM ctx_turns"))
	}
}

// Members of a cluster start at once on a fresh database: every one of
// them creates the schema, racing the others, and every one opens.
func TestPostgresConcurrentCreateSchema(t *testing.T) {
	for round := range 3 {
		url := pgtest.Start(t)
		const n = 4
		errs := make(chan error, n)
		start := make(chan struct{})
		for range n {
			go func() {
				<-start
				d, err := OpenPostgresDB(bg, DefaultPGOptions(url))
				if err == nil {
					d.Close()
				}
				errs <- err
			}()
		}
		close(start)
		for range n {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: open while %d others create the schema: %v", round, n-1, err)
			}
		}
	}
}

// TestPostgresIdleConnectionsEnded: the server ends every connection of
// the store's while they are idle in its pool (what a failover or a
// database restart does); the next writes, which find the dead
// connections in the pool, are retried on new ones and succeed.
func TestPostgresIdleConnectionsEnded(t *testing.T) {
	url := pgtest.Start(t)
	s := openPG(t, url)
	var branches []messages.BranchID
	for range 4 {
		h, err := s.CreateBranch(bg, persistence.BranchSpec{})
		if err != nil {
			t.Fatal(err)
		}
		branches = append(branches, h.Branch)
	}
	for round := range 3 {
		// Fill the pool with connections, then end them all.
		var wg sync.WaitGroup
		for _, b := range branches {
			wg.Go(func() {
				if _, err := s.Append(bg, b, persistence.AppendRequest{Payload: fmt.Appendf(nil, "before %d", round)}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		pgExec(t, url, `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`)
		for _, b := range branches {
			if _, err := s.Append(bg, b, persistence.AppendRequest{Payload: fmt.Appendf(nil, "after %d", round)}); err != nil {
				t.Fatalf("round %d: append after the server ended the pool's connections: %v", round, err)
			}
		}
	}
	checkPGStore(t, url, s)
}

// TestPostgresUnreachableIsUnavailable: while the database refuses
// connections, reads and writes fail with ErrUnavailable (the server
// answers 503 for it); once it is back, the same store goes on.
func TestPostgresUnreachableIsUnavailable(t *testing.T) {
	url := pgtest.Start(t)
	s := openPG(t, url)
	h, err := s.CreateBranch(bg, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(url[strings.LastIndex(url, "/"):strings.Index(url, "?")], "/")
	admin := strings.Replace(url, "/"+name+"?", "/postgres?", 1)
	pgExec(t, admin, "ALTER DATABASE "+name+" WITH ALLOW_CONNECTIONS false")
	t.Cleanup(func() { pgExec(t, admin, "ALTER DATABASE "+name+" WITH ALLOW_CONNECTIONS true") })
	pgExec(t, admin, "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = $1", name)
	if _, err := s.Head(bg, h.Branch); !errors.Is(err, persistence.ErrUnavailable) {
		t.Errorf("read while the database refuses connections = %v, want ErrUnavailable", err)
	}
	if _, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: []byte("refused")}); !errors.Is(err, persistence.ErrUnavailable) {
		t.Errorf("append while the database refuses connections = %v, want ErrUnavailable", err)
	}
	pgExec(t, admin, "ALTER DATABASE "+name+" WITH ALLOW_CONNECTIONS true")
	if _, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: []byte("back")}); err != nil {
		t.Fatalf("append once the database is back: %v", err)
	}
	checkPGStore(t, url, s)
}
