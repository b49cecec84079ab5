package pgdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextinfinity/ctxinf/internal/pgtest"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/storetest"
)

var _ storetest.DB = (*PGDB)(nil)

func openPGDB(t testing.TB, url string) *PGDB {
	t.Helper()
	o := DefaultPGOptions(url)
	o.Limits.MaxPayloadBytes = 1 << 20
	d, err := OpenPostgresDB(bg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestPGDBRefusesBadValues: a Tx with a value PostgreSQL cannot hold (a
// seq or index over BIGINT) or a malformed part is refused naming the
// field, and writes nothing of its other parts.
func TestPGDBRefusesBadValues(t *testing.T) {
	d := openPGDB(t, pgtest.Start(t))
	now := time.UnixMilli(1_700_000_000_000)
	u := messages.NewID[messages.TurnID](now)
	rec := &persistence.EventRecord{Actor: "a", Index: 1, Data: []byte("x")}
	for _, c := range []struct {
		field string
		set   func(tx *persistence.Tx)
	}{
		{"key 0: ", func(tx *persistence.Tx) { tx.Keys = []persistence.IdempotencyRow{{Key: "k"}} }},
		{"proxy entry 0: ", func(tx *persistence.Tx) {
			tx.Proxy = []persistence.ProxyEntry{{Kind: persistence.ProxyByKey, Name: []byte("k")}}
		}},
		{"new turn 0: seq", func(tx *persistence.Tx) { tx.NewTurns[0].Seq = math.MaxInt64 + 1 }},
		{"turn 0: seq", func(tx *persistence.Tx) {
			tx.Turns = []persistence.TurnRow{{Branch: tx.NewBranches[0].ID, Seq: math.MaxUint64}}
		}},
		{"state 0: seq", func(tx *persistence.Tx) { tx.States = []persistence.StateRow{{Seq: math.MaxInt64 + 1}} }},
		{"event 1: index", func(tx *persistence.Tx) {
			tx.Events = []persistence.EventRecord{*rec, {Actor: "a", Index: math.MaxInt64 + 1}}
		}},
		{"chunk 0: seq", func(tx *persistence.Tx) {
			tx.Chunks = []persistence.ChunkRow{{ID: messages.ChunkID(u), Branch: tx.NewBranches[0].ID, SourceTurn: u, Seq: math.MaxUint64}}
		}},
		// Refused by the group, after the parts before them were applied.
		{"chunk: id, branch and source_turn are required", func(tx *persistence.Tx) {
			tx.NewTurns[0].Phase = messages.PhaseAccepted
			tx.Chunks = []persistence.ChunkRow{{SourceTurn: u}}
		}},
		{"vector: 0 dimensions", func(tx *persistence.Tx) {
			tx.NewTurns[0].Phase = messages.PhaseAccepted
			tx.Vectors = []persistence.VectorRow{{Namespace: "n"}}
		}},
		{"tenant: 65 bytes", func(tx *persistence.Tx) { tx.NewBranches[0].Tenant = strings.Repeat("t", persistence.MaxTenantName+1) }},
		{"actor name", func(tx *persistence.Tx) { tx.Snapshot = &persistence.EventRecord{} }},
		{"previous snapshot", func(tx *persistence.Tx) { tx.PrevSnapshot = rec }},
	} {
		b := messages.NewID[messages.BranchID](now)
		s := messages.NewID[messages.SessionID](now)
		tx := &persistence.Tx{
			NewBranches: []persistence.BranchSpec{{ID: b}},
			Appends:     []persistence.TxAppend{{Branch: b, ID: u, Req: persistence.AppendRequest{Payload: []byte("p")}}},
			Sessions:    []persistence.SessionRow{{ID: s, Created: now}},
			NewTurns:    []persistence.TurnRow{{Branch: b, Seq: 1, ID: u}},
		}
		c.set(tx)
		_, err := d.Commit(bg, tx)
		if !errors.Is(err, persistence.ErrInvalidArgument) || !strings.Contains(err.Error(), c.field) {
			t.Fatalf("%s: Commit = %v, want ErrInvalidArgument naming %s", c.field, err, c.field)
		}
		if _, err := d.Head(bg, b); !errors.Is(err, persistence.ErrBranchNotFound) {
			t.Fatalf("%s: the refused Tx created its branch (%v)", c.field, err)
		}
		if _, err := d.Session(bg, s); !errors.Is(err, persistence.ErrRowNotFound) {
			t.Fatalf("%s: the refused Tx wrote its session (%v)", c.field, err)
		}
		if rs, _ := d.TurnRows(bg, b, 0, 10); len(rs) != 0 {
			t.Fatalf("%s: the refused Tx wrote turn rows %+v", c.field, rs)
		}
	}
	if _, err := d.Node(bg, u); !errors.Is(err, persistence.ErrNodeNotFound) {
		t.Fatalf("a refused Tx appended its turn (%v)", err)
	}
	// Only the three refused by the group (a chunk, a vector, a tenant)
	// reached it.
	if n := d.Stats().Groups; n != 3 {
		t.Fatalf("refused Txs reached the committer: %d groups, want 3", n)
	}
}

// TestPGDBGroupIsolatesFailedTx runs three Txs as one group (one SQL
// transaction): the second fails on a turn seq the first took in the
// same group, after appending to the branch the others append to. Its
// append, head move, blob reference and rows are undone; the first and
// third commit, the third chained on the first.
func TestPGDBGroupIsolatesFailedTx(t *testing.T) {
	url := pgtest.Start(t)
	d := openPGDB(t, url)
	now := time.UnixMilli(1_700_000_000_000)
	c := messages.NewID[messages.BranchID](now)
	s := messages.NewID[messages.SessionID](now)
	a1, a2, a3 := messages.NewID[messages.TurnID](now), messages.NewID[messages.TurnID](now), messages.NewID[messages.TurnID](now)
	zero := messages.TurnID{}
	shared := []byte("shared payload")
	txs := []*persistence.Tx{
		{NewBranches: []persistence.BranchSpec{{ID: c}},
			Appends:  []persistence.TxAppend{{Branch: c, ID: a1, Req: persistence.AppendRequest{Payload: []byte("first"), ExpectParent: &zero}}},
			NewTurns: []persistence.TurnRow{{Branch: c, Seq: 1, ID: a1, Phase: messages.PhaseAccepted}}},
		{Appends: []persistence.TxAppend{{Branch: c, ID: a2, Req: persistence.AppendRequest{Payload: shared, ExpectParent: &a1}}},
			Sessions: []persistence.SessionRow{{ID: s, Created: now}},
			Jobs:     []persistence.Job{{Type: persistence.JobRespond, Branch: c, Turn: a2, Created: now}},
			NewTurns: []persistence.TurnRow{{Branch: c, Seq: 1, ID: a2, Phase: messages.PhaseAccepted}}},
		{Appends: []persistence.TxAppend{{Branch: c, ID: a3, Req: persistence.AppendRequest{Payload: shared, ExpectParent: &a1}}},
			NewTurns: []persistence.TurnRow{{Branch: c, Seq: 2, ID: a3, Phase: messages.PhaseAccepted}}},
	}
	var batch []*op
	for _, tx := range txs {
		o := d.txOp(tx)

		batch = append(batch, o)
	}
	before := d.Stats()
	d.commitGroup(batch) // the committer's own step, on this goroutine
	for i, want := range []error{nil, persistence.ErrDuplicate, nil} {
		if err := batch[i].res.err; !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Fatalf("Tx %d = %v, want %v", i, err, want)
		}
	}
	if st := d.Stats(); st.Groups != before.Groups+1 || st.Appends != before.Appends+2 {
		t.Fatalf("%d groups, %d appends; want 1 group with 2 appends", st.Groups-before.Groups, st.Appends-before.Appends)
	}
	h, err := d.Head(bg, c)
	if err != nil || h.Node != a3 || h.Depth != 1 {
		t.Fatalf("head = %+v, %v; want a3 at depth 1", h, err)
	}
	if _, err := d.Node(bg, a2); !errors.Is(err, persistence.ErrNodeNotFound) {
		t.Fatalf("the failed Tx's append: %v", err)
	}
	if n, _ := d.BlobRefs(bg, persistence.HashOf(shared)); n != 1 {
		t.Fatalf("the shared payload has %d references, want 1 (the third Tx's)", n)
	}
	if rs, _ := d.TurnRows(bg, c, 0, 10); len(rs) != 2 || rs[0].ID != a1 || rs[1].ID != a3 {
		t.Fatalf("turn rows = %+v, want a1 at 1 and a3 at 2", rs)
	}
	if _, err := d.Session(bg, s); !errors.Is(err, persistence.ErrRowNotFound) {
		t.Fatalf("the failed Tx's session: %v", err)
	}
	if js, _ := d.Jobs(bg); len(js) != 0 {
		t.Fatalf("the failed Tx's job: %+v", js)
	}
	checkPGStore(t, url, d)
}

// TestPGDBGroupActorParts runs four Txs as one group: the second fails
// on an event index the first took in the group, and its chunk and term
// update are undone; the third finds the first's chunk (skipped) and
// partition entry (merged), and its previous snapshot compacts the
// first's events in the group; the fourth appends at an index that
// compaction freed, after it, as Badger's group would.
func TestPGDBGroupActorParts(t *testing.T) {
	url := pgtest.Start(t)
	d := openPGDB(t, url)
	now := time.UnixMilli(1_700_000_000_000)
	b := messages.NewID[messages.BranchID](now)
	turn := messages.NewID[messages.TurnID](now)
	const actor = "branch/g"
	ev := func(i uint64) persistence.EventRecord {
		return persistence.EventRecord{Actor: actor, Index: i, Data: fmt.Appendf(nil, "e%d", i)}
	}
	chunk := func(text string) persistence.ChunkRow {
		return persistence.ChunkRow{ID: messages.NewID[messages.ChunkID](now), Branch: b, SourceTurn: turn, Seq: 1, Type: messages.ChunkOther,
			Text: text, Hash: persistence.HashOf([]byte(text)), Terms: map[string]float32{text: 1}, TermCount: 1}
	}
	x, y := chunk("x"), chunk("y")
	again := x
	again.ID = messages.NewID[messages.ChunkID](now)
	update := func(term string) persistence.TermUpdate {
		return persistence.TermUpdate{Branch: b, Seq: 1, Chunk: x.ID, Add: map[string]float32{term: 1}, Count: 1}
	}
	txs := []*persistence.Tx{
		{Events: []persistence.EventRecord{ev(0), ev(1), ev(2)}, Chunks: []persistence.ChunkRow{x}},
		{Chunks: []persistence.ChunkRow{y}, TermUpdates: []persistence.TermUpdate{update("lost")}, Events: []persistence.EventRecord{ev(1)}},
		{Chunks: []persistence.ChunkRow{again}, TermUpdates: []persistence.TermUpdate{update("later")}, Events: []persistence.EventRecord{ev(3)},
			Snapshot: &persistence.EventRecord{Actor: actor, Index: 3, Data: []byte("s3")}, PrevSnapshot: &persistence.EventRecord{Actor: actor, Index: 2, Data: []byte("s2")}},
		{Events: []persistence.EventRecord{ev(0)}},
	}
	var batch []*op
	for _, tx := range txs {
		o := d.txOp(tx)

		batch = append(batch, o)
	}
	before := d.Stats()
	d.commitGroup(batch)
	for i, want := range []error{nil, persistence.ErrDuplicate, nil, nil} {
		if err := batch[i].res.err; !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Fatalf("Tx %d = %v, want %v", i, err, want)
		}
	}
	if n := batch[2].res.tx.ChunksSkipped; n != 1 {
		t.Fatalf("Tx 2 skipped %d chunks, want 1", n)
	}
	if st := d.Stats(); st.Groups != before.Groups+1 {
		t.Fatalf("%d groups, want 1", st.Groups-before.Groups)
	}
	var got []string
	if err := d.Events(bg, actor, 0, func(i uint64, data []byte) error {
		got = append(got, fmt.Sprintf("%d:%s", i, data))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"0:e0", "2:e2", "3:e3"}; !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if snap, _, _ := d.Snapshot(bg, actor); snap.Index != 3 {
		t.Fatalf("snapshot = %+v, want at 3", snap)
	}
	if prev, _, _ := d.PrevSnapshot(bg, actor); prev.Index != 2 {
		t.Fatalf("previous snapshot = %+v, want at 2", prev)
	}
	if cs, _ := d.Chunks(bg, turn); len(cs) != 1 || cs[0].ID != x.ID {
		t.Fatalf("chunks = %+v, want x only", cs)
	}
	var docs []persistence.ChunkDoc
	_ = d.BranchChunks(bg, b, func(doc persistence.ChunkDoc) error { docs = append(docs, doc); return nil })
	if len(docs) != 1 || docs[0].Chunk != x.ID || docs[0].TermCount != 2 || docs[0].Terms["later"] != 1 || docs[0].Terms["lost"] != 0 {
		t.Fatalf("partition = %+v, want x with x and later", docs)
	}
}

// TestPGDBConcurrentSameSeq: two runtimes (two PGDBs on one database)
// commit a turn at the same (branch, seq). First deterministically: B
// commits between A's reads and A's writes, so A's transaction fails on
// the moved head or the taken row and is retried, and A's Tx then fails
// with ErrHeadMismatch (it expected the old parent) or ErrDuplicate (its
// append lands, its row is taken). Then racing freely, round after round.
// Always exactly one wins, and the loser writes nothing.
func TestPGDBConcurrentSameSeq(t *testing.T) {
	for _, expect := range []bool{true, false} {
		t.Run(fmt.Sprintf("expect=%v", expect), func(t *testing.T) {
			url := pgtest.Start(t)
			a, b := openPGDB(t, url), openPGDB(t, url)
			now := time.UnixMilli(1_700_000_000_000)
			br := messages.NewID[messages.BranchID](now)
			r0 := messages.NewID[messages.TurnID](now)
			zero := messages.TurnID{}
			if _, err := a.Commit(bg, &persistence.Tx{NewBranches: []persistence.BranchSpec{{ID: br}},
				Appends:  []persistence.TxAppend{{Branch: br, ID: r0, Req: persistence.AppendRequest{Payload: []byte("root"), ExpectParent: &zero}}},
				NewTurns: []persistence.TurnRow{{Branch: br, Seq: 1, ID: r0, Phase: messages.PhaseAccepted}}}); err != nil {
				t.Fatal(err)
			}
			turnTx := func(id, parent messages.NodeID, seq uint64) *persistence.Tx {
				req := persistence.AppendRequest{Payload: []byte("p " + id.String())}
				if expect {
					req.ExpectParent = &parent
				}
				return &persistence.Tx{Appends: []persistence.TxAppend{{Branch: br, ID: id, Req: req}},
					NewTurns: []persistence.TurnRow{{Branch: br, Seq: seq, ID: id, Phase: messages.PhaseAccepted}}}
			}
			ua, ub := messages.NewID[messages.TurnID](now), messages.NewID[messages.TurnID](now)
			var hookErr error
			a.testHook = func(stage string, attempt int, _ pgx.Tx) {
				if stage == "read" && attempt == 0 {
					_, hookErr = b.Commit(bg, turnTx(ub, r0, 2))
				}
			}
			_, err := a.Commit(bg, turnTx(ua, r0, 2))
			a.testHook = nil
			if hookErr != nil {
				t.Fatal(hookErr)
			}
			want := persistence.ErrDuplicate
			if expect {
				want = persistence.ErrHeadMismatch
			}
			if !errors.Is(err, want) {
				t.Fatalf("A's Tx after B took seq 2 = %v, want %v", err, want)
			}
			if a.Stats().Retries == 0 {
				t.Fatal("A's transaction was not retried after B committed between its reads and its writes")
			}
			checkLoser := func(winner, loser messages.TurnID, seq uint64) {
				t.Helper()
				if _, err := a.Node(bg, loser); !errors.Is(err, persistence.ErrNodeNotFound) {
					t.Fatalf("seq %d: the loser's turn: %v, want ErrNodeNotFound", seq, err)
				}
				if h, _ := a.Head(bg, br); h.Node != winner {
					t.Fatalf("seq %d: head %s, want the winner's %s", seq, h.Node, winner)
				}
				if rs, _ := a.TurnRows(bg, br, seq, 10); len(rs) != 1 || rs[0].ID != winner {
					t.Fatalf("seq %d: rows %+v, want only the winner's", seq, rs)
				}
				if _, err := b.TurnRow(bg, br, loser); !errors.Is(err, persistence.ErrNodeNotFound) {
					t.Fatalf("seq %d: the loser's row: %v", seq, err)
				}
			}
			checkLoser(ub, ua, 2)

			// Free races: whatever the interleaving, one wins.
			head := ub
			for seq := uint64(3); seq < 13; seq++ {
				ids := []messages.TurnID{messages.NewID[messages.TurnID](now), messages.NewID[messages.TurnID](now)}
				start := make(chan struct{})
				errs := make([]error, 2)
				var wg sync.WaitGroup
				for i, d := range []*PGDB{a, b} {
					wg.Go(func() {
						<-start
						_, errs[i] = d.Commit(bg, turnTx(ids[i], head, seq))
					})
				}
				close(start)
				wg.Wait()
				var winners []int
				for i, err := range errs {
					switch {
					case err == nil:
						winners = append(winners, i)
					case errors.Is(err, persistence.ErrDuplicate), errors.Is(err, persistence.ErrHeadMismatch):
					default:
						t.Fatalf("seq %d: runtime %d: %v", seq, i, err)
					}
				}
				if len(winners) != 1 {
					t.Fatalf("seq %d: %d winners (errors %v), want exactly 1", seq, len(winners), errs)
				}
				w := winners[0]
				checkLoser(ids[w], ids[1-w], seq)
				head = ids[w]
			}
			checkPGStore(t, url, a)
		})
	}
}

// TestPGDBConnectionLost breaks the committer's connection inside a Tx's
// transaction. Before the writes, the Tx is retried and committed once:
// its append, its rows (the NewTurns row re-read free, not taken by its
// own first attempt) exactly once. Just before COMMIT, Commit returns
// ErrOutcomeUnknown and, the server having committed nothing, none of
// the Tx is stored.
func TestPGDBConnectionLost(t *testing.T) {
	for _, stage := range []string{"read", "commit"} {
		t.Run("stage="+stage, func(t *testing.T) {
			url := pgtest.Start(t)
			d := openPGDB(t, url)
			now := time.UnixMilli(1_700_000_000_000)
			b := messages.NewID[messages.BranchID](now)
			s := messages.NewID[messages.SessionID](now)
			u := messages.NewID[messages.TurnID](now)
			step := persistence.StepRow{ID: messages.NewID[messages.StepID](now), Turn: u, Branch: b,
				Outcome: messages.StepOutcome{Kind: messages.OutcomeCompleted}, Started: now, Ended: now}
			tx := &persistence.Tx{
				NewBranches: []persistence.BranchSpec{{ID: b}},
				Appends:     []persistence.TxAppend{{Branch: b, ID: u, Req: persistence.AppendRequest{Payload: []byte("during the kill")}}},
				Sessions:    []persistence.SessionRow{{ID: s, ActiveBranch: b, Created: now}},
				Branches:    []persistence.BranchRow{{ID: b, Session: s, Created: now}},
				NewTurns:    []persistence.TurnRow{{Branch: b, Seq: 1, ID: u, Phase: messages.PhaseAccepted}},
				States:      []persistence.StateRow{{Branch: b, Seq: 0, ID: messages.NewID[messages.StateID](now)}},
				Steps:       []persistence.StepRow{step},
				Jobs:        []persistence.Job{{Type: persistence.JobRespond, Branch: b, Turn: u, Created: now}},
			}
			killed := false
			d.testHook = func(st string, attempt int, ptx pgx.Tx) {
				if st == stage && !killed {
					killed = true
					killBackend(t, url, ptx)
				}
			}
			_, err := d.Commit(bg, tx)
			d.testHook = nil
			if !killed {
				t.Fatal("the hook did not run")
			}
			counts := func() []int64 {
				var n []int64
				for _, table := range []string{"ctx_heads", "ctx_turns", "ctx_sessions", "ctx_branches", "ctx_turn_rows",
					"ctx_states", "ctx_steps", "ctx_jobs"} {
					n = append(n, pgCount(t, url, "SELECT count(*) FROM "+table))
				}
				return n
			}
			switch stage {
			case "read":
				if err != nil {
					t.Fatalf("Tx retried after the connection broke = %v", err)
				}
				if d.Stats().Retries == 0 {
					t.Fatal("no retry counted")
				}
				if got := fmt.Sprint(counts()); got != "[1 1 1 1 1 1 1 1]" {
					t.Fatalf("rows per table = %s, want one of each", got)
				}
				if r, err := d.TurnRow(bg, b, u); err != nil || r.Seq != 1 {
					t.Fatalf("TurnRow = %+v, %v", r, err)
				}
			case "commit":
				if !errors.Is(err, ErrOutcomeUnknown) {
					t.Fatalf("Tx whose COMMIT lost its connection = %v, want ErrOutcomeUnknown", err)
				}
				if got := fmt.Sprint(counts()); got != "[0 0 0 0 0 0 0 0]" {
					t.Fatalf("rows per table = %s, want none", got)
				}
				// The caller that must know reads, and commits again.
				if _, err := d.Session(bg, s); !errors.Is(err, persistence.ErrRowNotFound) {
					t.Fatalf("Session = %v, want ErrRowNotFound", err)
				}
				if _, err := d.Commit(bg, tx); err != nil {
					t.Fatalf("the Tx again, on a new connection: %v", err)
				}
			}
			checkPGStore(t, url, d)
		})
	}
}

// TestPGDBActorPartsAllOrNothing: a Tx holding lifecycle rows, appends,
// retrieval rows, events and snapshots (with the compaction a previous
// snapshot brings) writes nothing when its last part fails, whether the
// group refuses it (an event index taken) or the database does (its last
// statement, the snapshot's, raises); once nothing fails, all of it is
// stored.
func TestPGDBActorPartsAllOrNothing(t *testing.T) {
	url := pgtest.Start(t)
	d := openPGDB(t, url)
	now := time.UnixMilli(1_700_000_000_000)
	b0 := messages.NewID[messages.BranchID](now)
	t0 := messages.NewID[messages.TurnID](now)
	old := persistence.ChunkRow{ID: messages.NewID[messages.ChunkID](now), Branch: b0, SourceTurn: t0, Seq: 1, Type: messages.ChunkOther,
		Text: "old", Hash: persistence.HashOf([]byte("old")), Terms: map[string]float32{"old": 1}, TermCount: 1}
	const actor = "branch/a"
	setup := &persistence.Tx{Chunks: []persistence.ChunkRow{old}, Snapshot: &persistence.EventRecord{Actor: actor, Index: 0, Data: []byte("s0")}}
	for i := range uint64(3) {
		setup.Events = append(setup.Events, persistence.EventRecord{Actor: actor, Index: i, Data: fmt.Appendf(nil, "e%d", i)})
	}
	if _, err := d.Commit(bg, setup); err != nil {
		t.Fatal(err)
	}

	c := messages.NewID[messages.BranchID](now)
	s := messages.NewID[messages.SessionID](now)
	u := messages.NewID[messages.TurnID](now)
	chunk := persistence.ChunkRow{ID: messages.NewID[messages.ChunkID](now), Branch: c, SourceTurn: u, Seq: 1, Type: messages.ChunkOther,
		Text: "new", Hash: persistence.HashOf([]byte("new")), Terms: map[string]float32{"new": 1}, TermCount: 1}
	tx := func(events ...uint64) *persistence.Tx {
		tx := &persistence.Tx{
			NewBranches: []persistence.BranchSpec{{ID: c}},
			Appends:     []persistence.TxAppend{{Branch: c, ID: u, Req: persistence.AppendRequest{Payload: []byte("mixed")}}},
			Sessions:    []persistence.SessionRow{{ID: s, ActiveBranch: c, Created: now}},
			NewTurns:    []persistence.TurnRow{{Branch: c, Seq: 1, ID: u, Phase: messages.PhaseAccepted}},
			Jobs:        []persistence.Job{{Type: persistence.JobRespond, Branch: c, Turn: u, Created: now}},
			Chunks:      []persistence.ChunkRow{chunk},
			Vectors:     []persistence.VectorRow{{Namespace: "ns", Chunk: chunk.ID, Vector: []float32{1, 2}}},
			TermUpdates: []persistence.TermUpdate{{Branch: b0, Seq: 1, Chunk: old.ID, Add: map[string]float32{"later": 1}, Count: 1}},
			// The latest snapshot moves to 3; the one at 2 becomes the
			// fallback, compacting events 0 and 1.
			Snapshot:     &persistence.EventRecord{Actor: actor, Index: 3, Data: []byte("s3")},
			PrevSnapshot: &persistence.EventRecord{Actor: actor, Index: 2, Data: []byte("s2")},
		}
		for _, i := range events {
			tx.Events = append(tx.Events, persistence.EventRecord{Actor: actor, Index: i, Data: fmt.Appendf(nil, "e%d", i)})
		}
		return tx
	}
	events := func() []uint64 {
		var out []uint64
		if err := d.Events(bg, actor, 0, func(i uint64, _ []byte) error { out = append(out, i); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	unchanged := func(what string) {
		t.Helper()
		if _, err := d.Head(bg, c); !errors.Is(err, persistence.ErrBranchNotFound) {
			t.Fatalf("%s: branch: %v, want ErrBranchNotFound", what, err)
		}
		if _, err := d.Node(bg, u); !errors.Is(err, persistence.ErrNodeNotFound) {
			t.Fatalf("%s: append: %v, want ErrNodeNotFound", what, err)
		}
		if _, err := d.Session(bg, s); !errors.Is(err, persistence.ErrRowNotFound) {
			t.Fatalf("%s: session: %v, want ErrRowNotFound", what, err)
		}
		if js, _ := d.Jobs(bg); len(js) != 0 {
			t.Fatalf("%s: jobs %+v", what, js)
		}
		if cs, _ := d.Chunks(bg, u); len(cs) != 0 {
			t.Fatalf("%s: chunks %+v", what, cs)
		}
		if v, _ := d.Vector(bg, "ns", chunk.ID); v != nil {
			t.Fatalf("%s: vector %v", what, v)
		}
		_ = d.BranchChunks(bg, b0, func(doc persistence.ChunkDoc) error {
			if doc.TermCount != 1 || doc.Terms["later"] != 0 {
				t.Fatalf("%s: partition entry updated: %+v", what, doc)
			}
			return nil
		})
		if got := events(); !slices.Equal(got, []uint64{0, 1, 2}) {
			t.Fatalf("%s: events %v, want 0 1 2", what, got)
		}
		if snap, ok, _ := d.Snapshot(bg, actor); !ok || snap.Index != 0 {
			t.Fatalf("%s: snapshot %+v", what, snap)
		}
		if prev, ok, _ := d.PrevSnapshot(bg, actor); ok {
			t.Fatalf("%s: previous snapshot %+v", what, prev)
		}
	}

	// The group refuses the last event: its index is taken.
	if _, err := d.Commit(bg, tx(3, 1)); !errors.Is(err, persistence.ErrDuplicate) || !strings.Contains(err.Error(), "event 1 of branch/a") {
		t.Fatalf("Commit with an event index taken = %v, want ErrDuplicate naming it", err)
	}
	unchanged("event index taken")

	// The database refuses the last statement, the snapshot's.
	pgExec(t, url, `CREATE FUNCTION ctx_test_refuse() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'refused by test'; END $$`)
	pgExec(t, url, `CREATE TRIGGER ctx_test_refuse BEFORE INSERT OR UPDATE ON ctx_snapshots
		FOR EACH ROW EXECUTE FUNCTION ctx_test_refuse()`)
	if _, err := d.Commit(bg, tx(3)); err == nil || !strings.Contains(err.Error(), "refused by test") {
		t.Fatalf("Commit whose snapshot the database refuses = %v, want its error", err)
	}
	unchanged("snapshot refused")

	pgExec(t, url, `DROP TRIGGER ctx_test_refuse ON ctx_snapshots`)
	if _, err := d.Commit(bg, tx(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Node(bg, u); err != nil {
		t.Fatal(err)
	}
	if got := events(); !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("events after the snapshot at 3 with fallback 2 = %v, want 2 3", got)
	}
	if cs, _ := d.Chunks(bg, u); len(cs) != 1 || cs[0].ID != chunk.ID {
		t.Fatalf("chunks = %+v", cs)
	}
	if v, _ := d.Vector(bg, "ns", chunk.ID); !slices.Equal(v, []float32{1, 2}) {
		t.Fatalf("vector = %v", v)
	}
	if snap, _, _ := d.Snapshot(bg, actor); snap.Index != 3 || string(snap.Data) != "s3" {
		t.Fatalf("snapshot = %+v", snap)
	}
	if prev, _, _ := d.PrevSnapshot(bg, actor); prev.Index != 2 || string(prev.Data) != "s2" {
		t.Fatalf("previous snapshot = %+v", prev)
	}
	_ = d.BranchChunks(bg, b0, func(doc persistence.ChunkDoc) error {
		if doc.TermCount != 2 || doc.Terms["later"] != 1 {
			t.Fatalf("partition entry after the update: %+v", doc)
		}
		return nil
	})
}

// TestPGDBKeyedAllOrNothing: a Tx holding lifecycle rows, a branch of a
// tenant and its root, a touch, a retention, the retention job's record,
// an import, events, idempotency keys and proxy entries writes nothing when its
// last part fails, whether the group refuses it (a key naming another
// request) or the database does (its last statement, the retention
// job's record, raises); once nothing fails, all of it is stored.
func TestPGDBKeyedAllOrNothing(t *testing.T) {
	url := pgtest.Start(t)
	d := openPGDB(t, url)
	now := time.UnixMilli(1_700_000_000_000)
	owner := messages.NewID[messages.BranchID](now)
	taken := persistence.IdempotencyRow{Scope: persistence.ScopeTurn, Owner: owner, Key: "taken", Hash: "h0", Turn: messages.NewID[messages.TurnID](now)}
	if _, err := d.Commit(bg, &persistence.Tx{Keys: []persistence.IdempotencyRow{taken}}); err != nil {
		t.Fatal(err)
	}
	c := messages.NewID[messages.BranchID](now)
	s := messages.NewID[messages.SessionID](now)
	u := messages.NewID[messages.TurnID](now)
	mine := persistence.IdempotencyRow{Scope: persistence.ScopeTurn, Owner: c, Key: "mine", Hash: "h1", Turn: u}
	week := 7 * 24 * time.Hour
	tx := func(keys ...persistence.IdempotencyRow) *persistence.Tx {
		return &persistence.Tx{
			NewBranches:  []persistence.BranchSpec{{ID: c, Tenant: "acme"}},
			Appends:      []persistence.TxAppend{{Branch: c, ID: u, Req: persistence.AppendRequest{Payload: []byte("keyed")}}},
			Sessions:     []persistence.SessionRow{{ID: s, ActiveBranch: c, Created: now}},
			NewTurns:     []persistence.TurnRow{{Branch: c, Seq: 1, ID: u, Phase: messages.PhaseAccepted}},
			Events:       []persistence.EventRecord{{Actor: "a", Index: 0, Data: []byte("e0")}},
			Touched:      []persistence.SessionTouch{{Session: s, At: now.Add(time.Hour)}},
			Retention:    []persistence.SessionRetention{{Session: s, Idle: &week}},
			RetentionJob: &persistence.RetentionJob{Pending: []messages.SessionID{s}, Deleted: 1},
			Imports:      []persistence.ImportRow{{Session: s, Started: now}},
			Keys:         append([]persistence.IdempotencyRow{mine}, keys...),
			Proxy: []persistence.ProxyEntry{{Kind: persistence.ProxyByKey, Name: []byte("conv"), ProxyTarget: persistence.ProxyTarget{Branch: c}},
				{Tenant: "acme", Kind: persistence.ProxyByTurn, Name: u[:], ProxyTarget: persistence.ProxyTarget{Branch: c}}},
		}
	}
	unchanged := func(what string) {
		t.Helper()
		if _, err := d.Head(bg, c); !errors.Is(err, persistence.ErrBranchNotFound) {
			t.Fatalf("%s: branch: %v, want ErrBranchNotFound", what, err)
		}
		if _, err := d.Node(bg, u); !errors.Is(err, persistence.ErrNodeNotFound) {
			t.Fatalf("%s: append: %v, want ErrNodeNotFound", what, err)
		}
		if _, err := d.Session(bg, s); !errors.Is(err, persistence.ErrRowNotFound) {
			t.Fatalf("%s: session: %v, want ErrRowNotFound", what, err)
		}
		n := 0
		_ = d.Events(bg, "a", 0, func(uint64, []byte) error { n++; return nil })
		if n != 0 {
			t.Fatalf("%s: %d events", what, n)
		}
		if _, err := d.IdempotencyKey(bg, persistence.ScopeTurn, c, "mine"); !errors.Is(err, persistence.ErrKeyNotFound) {
			t.Fatalf("%s: key: %v, want ErrKeyNotFound", what, err)
		}
		if _, err := d.ProxyLookup(bg, "", persistence.ProxyByKey, []byte("conv")); !errors.Is(err, persistence.ErrProxyNotFound) {
			t.Fatalf("%s: proxy key: %v, want ErrProxyNotFound", what, err)
		}
		if _, err := d.ProxyLookup(bg, "acme", persistence.ProxyByTurn, u[:]); !errors.Is(err, persistence.ErrProxyNotFound) {
			t.Fatalf("%s: proxy turn: %v, want ErrProxyNotFound", what, err)
		}
		if n := pgCount(t, url, `SELECT (SELECT count(*) FROM ctx_branch_tenants) + (SELECT count(*) FROM ctx_root_tenants)
			+ (SELECT count(*) FROM ctx_activity) + (SELECT count(*) FROM ctx_imports)`); n != 0 {
			t.Fatalf("%s: %d tenant, activity or import rows", what, n)
		}
		if j, err := d.RetentionJob(bg); err != nil || j.Deleted != 0 || len(j.Pending) != 0 {
			t.Fatalf("%s: retention job %+v, %v", what, j, err)
		}
	}

	// The group refuses the last key: it names another request.
	other := taken
	other.Turn = u
	if _, err := d.Commit(bg, tx(other)); !errors.Is(err, persistence.ErrDuplicate) || !strings.Contains(err.Error(), `key 1: `) {
		t.Fatalf("Commit with a key naming another request = %v, want ErrDuplicate naming key 1", err)
	}
	unchanged("key taken")

	// The database refuses the retention job's record, written last.
	pgExec(t, url, `CREATE FUNCTION ctx_test_refuse() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'refused by test'; END $$`)
	pgExec(t, url, `CREATE TRIGGER ctx_test_refuse BEFORE INSERT OR UPDATE ON ctx_meta
		FOR EACH ROW EXECUTE FUNCTION ctx_test_refuse()`)
	if _, err := d.Commit(bg, tx(taken)); err == nil || !strings.Contains(err.Error(), "refused by test") {
		t.Fatalf("Commit whose retention job record the database refuses = %v, want its error", err)
	}
	unchanged("retention job record refused")

	pgExec(t, url, `DROP TRIGGER ctx_test_refuse ON ctx_meta`)
	if _, err := d.Commit(bg, tx(taken)); err != nil { // taken again, the same request: nothing
		t.Fatal(err)
	}
	if _, err := d.Node(bg, u); err != nil {
		t.Fatal(err)
	}
	if got, err := d.IdempotencyKey(bg, persistence.ScopeTurn, c, "mine"); err != nil || got.Turn != u {
		t.Fatalf("key = %+v, %v", got, err)
	}
	if got, err := d.ProxyLookup(bg, "acme", persistence.ProxyByTurn, u[:]); err != nil || got.Branch != c {
		t.Fatalf("proxy turn = %+v, %v", got, err)
	}
	if got, err := d.IdempotencyKey(bg, persistence.ScopeTurn, owner, "taken"); err != nil || got.Turn != taken.Turn {
		t.Fatalf("the key taken first = %+v, %v", got, err)
	}
	if a, err := d.SessionActivity(bg, s); err != nil || !a.Last.Equal(now.Add(time.Hour)) || a.Session.Retention == nil || *a.Session.Retention != week {
		t.Fatalf("SessionActivity = %+v, %v; want the touch and the retention", a, err)
	}
	if j, err := d.RetentionJob(bg); err != nil || j.Deleted != 1 {
		t.Fatalf("RetentionJob = %+v, %v", j, err)
	}
	if _, err := d.Import(bg, s); err != nil {
		t.Fatal(err)
	}
	if got, err := d.BranchTenant(bg, c); err != nil || got != "acme" {
		t.Fatalf("BranchTenant = %q, %v; want acme", got, err)
	}
	if got, err := d.TurnTenant(bg, u); err != nil || got != "acme" {
		t.Fatalf("TurnTenant = %q, %v; want acme", got, err)
	}
}

// TestPGDBClaimRace: runtimes on one database racing to claim one proxy
// key, or to store one idempotency key for different requests: exactly
// one wins; every claimer is answered with the winner's branch, and every
// other key writer with ErrDuplicate.
func TestPGDBClaimRace(t *testing.T) {
	url := pgtest.Start(t)
	dbs := []*PGDB{openPGDB(t, url), openPGDB(t, url)}
	now := time.UnixMilli(1_700_000_000_000)
	const per = 4 // claimers per runtime
	for round := range 5 {
		key := fmt.Sprintf("race-%d", round)
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			mine    = make([]messages.BranchID, 2*per)
			claimed = make([]persistence.ProxyTarget, 2*per)
			keyErrs = make([]error, 2*per)
			errs    = make([]error, 2*per)
		)
		for i := range 2 * per {
			mine[i] = messages.NewID[messages.BranchID](now)
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := dbs[i%2]
				<-start
				claimed[i], errs[i] = d.ClaimProxyKey(bg, "acme", key, mine[i])
				_, keyErrs[i] = d.Commit(bg, &persistence.Tx{Keys: []persistence.IdempotencyRow{{Scope: persistence.ScopeFork, Owner: persistence.TenantOwner("acme"), Key: key,
					Hash: fmt.Sprint(i), Branch: mine[i]}}})
			}()
		}
		close(start)
		wg.Wait()
		winner := claimed[0].Branch
		if !slices.Contains(mine, winner) {
			t.Fatalf("round %d: the key names %s, no claimer's branch", round, winner)
		}
		for i := range 2 * per {
			if errs[i] != nil || claimed[i].Branch != winner {
				t.Fatalf("round %d: claimer %d = %+v, %v; want %s", round, i, claimed[i], errs[i], winner)
			}
		}
		won := 0
		var wonBranch messages.BranchID
		for i, err := range keyErrs {
			switch {
			case err == nil:
				won++
				wonBranch = mine[i]
			case !errors.Is(err, persistence.ErrDuplicate):
				t.Fatalf("round %d: key writer %d = %v, want nil or ErrDuplicate", round, i, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d key writers won, want 1", round, won)
		}
		for _, d := range dbs {
			if got, err := d.IdempotencyKey(bg, persistence.ScopeFork, persistence.TenantOwner("acme"), key); err != nil || got.Branch != wonBranch {
				t.Fatalf("round %d: key = %+v, %v; want the winner's %s", round, got, err, wonBranch)
			}
			if got, err := d.ProxyLookup(bg, "acme", persistence.ProxyByKey, []byte(key)); err != nil || got.Branch != winner {
				t.Fatalf("round %d: lookup = %+v, %v; want %s", round, got, err, winner)
			}
		}
	}
}

// TestPGPurgeLeavesNoID purges a session and finds none of its ids (the
// session's, its branch's, its turns', steps', chunks' and blobs', its
// actor's name) in any row of any ctx_* table (every one, listed from
// information_schema), while the ids of a session kept are all found.
func TestPGPurgeLeavesNoID(t *testing.T) {
	url := pgtest.Start(t)
	d := openPGDB(t, url)
	ctx := context.Background()
	ids := func(f storetest.SessionFixture) map[string][]byte {
		m := map[string][]byte{"session": f.Session[:], "branch": f.Branch[:], "actor": []byte(f.Actor)}
		for i, turn := range f.Turns {
			m[fmt.Sprintf("turn %d", i)] = turn[:]
			tu, err := d.Node(ctx, turn)
			if err != nil {
				t.Fatal(err)
			}
			m[fmt.Sprintf("blob %d", i)] = tu.PayloadHash[:]
			cs, err := d.Chunks(ctx, turn)
			if err != nil || len(cs) != 1 {
				t.Fatalf("Chunks = %+v, %v", cs, err)
			}
			m[fmt.Sprintf("chunk %d", i)] = cs[0].ID[:]
			ss, err := d.Steps(ctx, turn)
			if err != nil || len(ss) != 1 {
				t.Fatalf("Steps = %+v, %v", ss, err)
			}
			m[fmt.Sprintf("step %d", i)] = ss[0].ID[:]
		}
		return m
	}
	fg := storetest.WriteSession(t, d, "ID-GONE-2b81", 3)
	fk := storetest.WriteSession(t, d, "ID-KEPT-90ce", 2)
	if _, err := d.Commit(ctx, &persistence.Tx{Touched: []persistence.SessionTouch{{Session: fg.Session, At: time.Now()}},
		Imports: []persistence.ImportRow{{Session: fg.Session, Started: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	gone, kept := ids(fg), ids(fk)
	for what, id := range gone {
		if got := tablesHolding(t, url, id); len(got) == 0 {
			t.Fatalf("before the delete no table holds the %s id %x: the scan cannot see it", what, id)
		}
	}
	res, err := d.Purge(ctx, persistence.PurgeSpec{Session: fg.Session, DeleteSession: true, Actors: []string{fg.Actor}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Keys == 0 || res.Blobs != 3 {
		t.Errorf("Purge = %+v, want rows and 3 blobs", res)
	}
	for what, id := range gone {
		if got := tablesHolding(t, url, id); len(got) > 0 {
			t.Errorf("after the delete the %s id %x is in %v", what, id, got)
		}
	}
	for what, id := range kept {
		if got := tablesHolding(t, url, id); len(got) == 0 {
			t.Errorf("after the delete no table holds the kept %s id %x", what, id)
		}
	}
}

// TestPGPurgeRacesDedup purges a session while another session appends
// turns with the payload of the purged session's turn (deduplicated onto
// its blob): whichever commits first, every turn kept reads its payload
// and the blob's count is the kept turns'.
func TestPGPurgeRacesDedup(t *testing.T) {
	d := openPGDB(t, pgtest.Start(t))
	ctx := context.Background()
	payload := []byte("RACE-SHARED-payload-61f0")
	fb := storetest.WriteSession(t, d, "RACE-KEPT", 0)
	kept := 0
	for round := range 5 {
		fa := storetest.WriteSession(t, d, "RACE-GONE", 0)
		if _, err := d.Append(ctx, fa.Branch, persistence.AppendRequest{Payload: payload}); err != nil {
			t.Fatal(err)
		}
		done := make(chan int)
		go func() {
			n := 0
			for range 10 {
				if _, err := d.Append(ctx, fb.Branch, persistence.AppendRequest{Payload: payload}); err != nil {
					t.Errorf("round %d: append: %v", round, err)
					break
				}
				n++
			}
			done <- n
		}()
		if _, err := d.Purge(ctx, persistence.PurgeSpec{Session: fa.Session, DeleteSession: true}); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		kept += <-done
	}
	p, err := d.Last(ctx, fb.Branch, 1000)
	if err != nil || len(p.Nodes) != kept {
		t.Fatalf("Last = %d turns, %v; want %d", len(p.Nodes), err, kept)
	}
	for _, tu := range p.Nodes {
		if b, err := d.Blob(ctx, tu.PayloadHash); err != nil || !bytes.Equal(b, payload) {
			t.Fatalf("Blob(turn %s) = %q, %v", tu.ID, b, err)
		}
	}
	if n, err := d.BlobRefs(ctx, persistence.HashOf(payload)); err != nil || n != uint64(kept) {
		t.Errorf("BlobRefs = %d, %v; want %d", n, err, kept)
	}
}

// TestPGPurgeStaleCache: a runtime whose turn cache holds turns another
// runtime purged neither forks at them nor overlays them: the writes read
// the turns in their transaction.
func TestPGPurgeStaleCache(t *testing.T) {
	url := pgtest.Start(t)
	d1, d2 := openPGDB(t, url), openPGDB(t, url)
	ctx := context.Background()
	f := storetest.WriteSession(t, d1, "STALE-GONE-4e1d", 2)
	if _, err := d2.TurnTenant(ctx, f.Turns[1]); err != nil { // caches the turn on d2
		t.Fatal(err)
	}
	if _, ok := d2.turns.Get(f.Turns[1]); !ok {
		t.Fatal("d2 did not cache the turn: the test does not test the cache")
	}
	if _, err := d1.Purge(ctx, persistence.PurgeSpec{Session: f.Session, DeleteSession: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := d2.CreateBranch(ctx, persistence.BranchSpec{At: f.Turns[1]}); !errors.Is(err, persistence.ErrNodeNotFound) {
		t.Errorf("fork at a purged turn = %v, want ErrNodeNotFound", err)
	}
	if _, err := d2.PutOverlay(ctx, f.Turns[1], persistence.OverlayRequest{Payload: []byte("x")}); !errors.Is(err, persistence.ErrNodeNotFound) {
		t.Errorf("overlay of a purged turn = %v, want ErrNodeNotFound", err)
	}
}
