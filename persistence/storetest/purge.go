package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// SessionFixture is a session written with every kind of row a branch
// has, each holding a marker (WriteSession); engines' own purge tests
// use it too.
type SessionFixture struct {
	Session messages.SessionID
	Branch  messages.BranchID
	Turns   []messages.NodeID
	Step    messages.StepID
	Actor   string
}

// WriteSession writes a session of one branch with turns turns, every row
// of them holding marker, to d.
func WriteSession(t testing.TB, d DB, marker string, turns int) SessionFixture {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	f := SessionFixture{Session: messages.NewID[messages.SessionID](now), Branch: messages.NewID[messages.BranchID](now),
		Step: messages.NewID[messages.StepID](now)}
	f.Actor = "ctxinf/b-" + f.Branch.String()
	tx := &persistence.Tx{
		// An owner row (and one of its root), which go with the branch.
		NewBranches: []persistence.BranchSpec{{ID: f.Branch, Tenant: "tenant " + marker}},
		Sessions:    []persistence.SessionRow{{ID: f.Session, ActiveBranch: f.Branch, Created: now}},
		Branches:    []persistence.BranchRow{{ID: f.Branch, Session: f.Session, Label: "main", Created: now}},
	}
	if _, err := d.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	for i := range turns {
		f.Turns = append(f.Turns, appendTurn(t, d, f, uint64(i+1), marker))
	}
	return f
}

// appendTurn appends a turn holding marker to f's branch, with its rows.
func appendTurn(t testing.TB, d DB, f SessionFixture, seq uint64, marker string) messages.NodeID {
	t.Helper()
	now := time.Now()
	turn := messages.NewID[messages.NodeID](now)
	step := f.Step
	if seq > 1 {
		step = messages.NewID[messages.StepID](now)
	}
	text := marker + " turn " + turn.String()
	req, _ := json.Marshal(map[string]string{"input": text})
	chunk := messages.NewID[messages.ChunkID](now)
	tx := &persistence.Tx{
		Appends:  []persistence.TxAppend{{Branch: f.Branch, ID: turn, Req: persistence.AppendRequest{Payload: []byte(text)}}},
		NewTurns: []persistence.TurnRow{{Branch: f.Branch, Seq: seq, ID: turn, Phase: messages.PhaseDone, Step: step, Reason: marker, Updated: now}},
		States:   []persistence.StateRow{{Branch: f.Branch, Seq: seq, ID: messages.NewID[messages.StateID](now), Summary: marker, Pinned: []string{marker}}},
		Steps:    []persistence.StepRow{{ID: step, Branch: f.Branch, Turn: turn, Request: req, Response: req, Outcome: messages.StepOutcome{Kind: messages.OutcomeCompleted}}},
		Chunks: []persistence.ChunkRow{{ID: chunk, Session: f.Session, Branch: f.Branch, SourceTurn: turn, Seq: seq, Type: messages.ChunkCode, Text: text,
			Hash: persistence.HashOf([]byte(text)), Terms: map[string]float32{marker: 1}, TermCount: 1}},
		Vectors: []persistence.VectorRow{{Namespace: "test/2", Chunk: chunk, Vector: []float32{1, 2}}},
		Jobs:    []persistence.Job{{Type: persistence.JobIndex, Branch: f.Branch, Turn: turn, Created: now}},
		Events:  []persistence.EventRecord{{Actor: f.Actor, Index: seq - 1, Data: []byte(marker)}},
		Keys: []persistence.IdempotencyRow{{Scope: persistence.ScopeTurn, Owner: f.Branch, Key: "key " + marker + turn.String(), Hash: marker,
			Turn: turn, Created: now}},
		Proxy: []persistence.ProxyEntry{{Kind: persistence.ProxyByKey, Name: []byte(marker + turn.String()), ProxyTarget: persistence.ProxyTarget{Branch: f.Branch}},
			{Kind: persistence.ProxyByResponse, Name: persistence.ProxyResponseName(turn, 0), ProxyTarget: persistence.ProxyTarget{Branch: f.Branch, Turn: turn, Response: req}}},
	}
	if seq == 1 {
		tx.Snapshot = &persistence.EventRecord{Actor: f.Actor, Index: 0, Data: []byte(marker)}
	}
	if _, err := d.Commit(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	return turn
}

// testPurgeSessionLeavesNoByte deletes a session whose every row holds a
// marker and finds no byte of it left: on Badger in no file of the store
// (in Badger's logs (memtables), and the redo log), on PostgreSQL in no
// row of any table; a session kept, with its own marker, is found and
// readable.
func testPurgeSessionLeavesNoByte(t *testing.T, d DB, e Env) {
	purgeSessionLeavesNoByte(t, d, e, false)
}

// testPurgeCompactedSessionLeavesNoByte is testPurgeSessionLeavesNoByte
// with the storage compacted before the delete (Badger: its tables).
func testPurgeCompactedSessionLeavesNoByte(t *testing.T, d DB, e Env) {
	purgeSessionLeavesNoByte(t, d, e, true)
}

func purgeSessionLeavesNoByte(t *testing.T, d DB, e Env, compact bool) {
	ctx := context.Background()
	gone, kept := "MARKER-GONE-7f3a9c", "MARKER-KEPT-41d2e8"
	fg := WriteSession(t, d, gone, 3)
	fk := WriteSession(t, d, kept, 2)
	if compact {
		if err := e.Compact(); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.Holding(t, gone); len(got) == 0 {
		t.Fatalf("before the delete nothing holds %s: the scan cannot see it", gone)
	}
	res, err := d.Purge(ctx, persistence.PurgeSpec{Session: fg.Session, DeleteSession: true, Actors: []string{fg.Actor}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Nodes != 3 || res.Turns != 3 || res.Chunks != 3 || res.Blobs != 3 || len(res.Steps) != 3 {
		t.Errorf("Purge = %+v, want 3 nodes, turns, chunks, blobs and steps", res)
	}
	if got := e.Holding(t, gone); len(got) > 0 {
		t.Errorf("after the delete %s is still in %v", gone, got)
	}
	if _, err := d.Session(ctx, fg.Session); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("Session(deleted) = %v, want ErrNotFound", err)
	}
	if _, err := d.Head(ctx, fg.Branch); !errors.Is(err, persistence.ErrBranchNotFound) {
		t.Errorf("Head(deleted) = %v, want ErrBranchNotFound", err)
	}
	if _, err := d.Node(ctx, fg.Turns[0]); !errors.Is(err, persistence.ErrNodeNotFound) {
		t.Errorf("Turn(deleted) = %v, want ErrNodeNotFound", err)
	}
	if _, err := d.ProxyLookup(ctx, persistence.DefaultTenant, persistence.ProxyByKey, []byte(gone+fg.Turns[0].String())); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("ProxyLookup(deleted) = %v, want ErrNotFound", err)
	}
	if _, err := d.ProxyLookup(ctx, persistence.DefaultTenant, persistence.ProxyByResponse, persistence.ProxyResponseName(fg.Turns[0], 0)); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("ProxyLookup(a deleted branch's response) = %v, want ErrNotFound", err)
	}
	checkPurgedReads(t, d, fg, gone)
	// The store goes on: a write after the delete, then a reopen.
	appendTurn(t, d, fk, 3, kept)
	d = e.Reopen()
	if got := e.Holding(t, gone); len(got) > 0 {
		t.Errorf("after a reopen %s is in %v", gone, got)
	}
	if got := e.Holding(t, kept); len(got) == 0 {
		t.Errorf("nothing holds the kept session's %s", kept)
	}
	p, err := d.Last(ctx, fk.Branch, 10)
	if err != nil || len(p.Nodes) != 3 {
		t.Fatalf("Last(kept) = %d turns, %v; want 3", len(p.Nodes), err)
	}
	b, err := d.Blob(ctx, p.Nodes[0].PayloadHash)
	if err != nil || !bytes.Contains(b, []byte(kept)) {
		t.Errorf("Blob(kept) = %q, %v", b, err)
	}
	if s, err := d.StateRow(ctx, fk.Branch, 1); err != nil || s.Summary != kept {
		t.Errorf("StateRow(kept) = %+v, %v", s, err)
	}
	if tn, err := d.TurnTenant(ctx, p.Nodes[0].ID); err != nil || tn != "tenant "+kept {
		t.Errorf("TurnTenant(kept) = %q, %v", tn, err)
	}
	if _, err := d.Session(ctx, fg.Session); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("after a reopen Session(deleted) = %v, want ErrNotFound", err)
	}
	checkPurgedReads(t, d, fg, gone)
}

// checkPurgedReads checks that no read of the Database finds a row of
// the purged session f.
func checkPurgedReads(t *testing.T, d DB, f SessionFixture, marker string) {
	t.Helper()
	ctx := context.Background()
	notFound := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, persistence.ErrNotFound) {
			t.Errorf("%s of the deleted session = %v, want ErrNotFound", what, err)
		}
	}
	_, err := d.BranchRow(ctx, f.Branch)
	notFound("BranchRow", err)
	_, err = d.StateRow(ctx, f.Branch, 1)
	notFound("StateRow", err)
	_, err = d.StepRow(ctx, f.Step)
	notFound("StepRow", err)
	_, err = d.BranchTenant(ctx, f.Branch)
	notFound("BranchTenant", err)
	_, err = d.SessionActivity(ctx, f.Session)
	notFound("SessionActivity", err)
	_, err = d.IdempotencyKey(ctx, persistence.ScopeTurn, f.Branch, "key "+marker+f.Turns[0].String())
	notFound("IdempotencyKey", err)
	if bs, err := d.Branches(ctx, f.Session); err != nil || len(bs) != 0 {
		t.Errorf("Branches(deleted) = %+v, %v", bs, err)
	}
	for _, turn := range f.Turns {
		_, err := d.Node(ctx, turn)
		notFound("Turn", err)
		if rs, err := d.TurnRows(ctx, f.Branch, 0, 10); err != nil || len(rs) != 0 {
			t.Errorf("TurnRows(deleted) = %+v, %v", rs, err)
		}
		if cs, err := d.Chunks(ctx, turn); err != nil || len(cs) != 0 {
			t.Errorf("Chunks(deleted turn) = %+v, %v", cs, err)
		}
		if ss, err := d.Steps(ctx, turn); err != nil || len(ss) != 0 {
			t.Errorf("Steps(deleted turn) = %+v, %v", ss, err)
		}
		if bs, err := d.TurnBranches(ctx, turn); err != nil || len(bs) != 0 {
			t.Errorf("TurnBranches(deleted turn) = %v, %v", bs, err)
		}
	}
	n := 0
	if err := d.Events(ctx, f.Actor, 0, func(uint64, []byte) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("Events(deleted) = %d, %v", n, err)
	}
	if _, ok, err := d.Snapshot(ctx, f.Actor); ok || err != nil {
		t.Errorf("Snapshot(deleted) = %t, %v", ok, err)
	}
	js, err := d.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		if j.Branch == f.Branch {
			t.Errorf("job %+v of the deleted branch is left", j)
		}
	}
	n = 0
	if err := d.BranchChunks(ctx, f.Branch, func(persistence.ChunkDoc) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("BranchChunks(deleted) = %d, %v", n, err)
	}
}

// testPurgeBranchWithForks: a branch a fork continues is refused
// (ErrInUse, nothing deleted); the fork is deleted alone, its parent's
// turns (which the fork shared) kept; a dedup'd payload the fork shares
// with its parent stays.
func testPurgeBranchWithForks(t *testing.T, d DB, e Env) {
	ctx := context.Background()
	parent := WriteSession(t, d, "PARENT-KEPT-19ab", 2)
	now := time.Now()
	fork := SessionFixture{Session: parent.Session, Branch: messages.NewID[messages.BranchID](now), Step: messages.NewID[messages.StepID](now)}
	fork.Actor = "ctxinf/b-" + fork.Branch.String()
	_, err := d.Commit(ctx, &persistence.Tx{
		NewBranches: []persistence.BranchSpec{{ID: fork.Branch, At: parent.Turns[0]}},
		Branches:    []persistence.BranchRow{{ID: fork.Branch, Session: parent.Session, Parent: parent.Branch, ForkAt: parent.Turns[0], ForkSeq: 1, Created: now}},
	})
	if err != nil {
		t.Fatal(err)
	}
	appendTurn(t, d, fork, 2, "FORK-GONE-5c7e")
	before := e.Holding(t, "FORK-GONE-5c7e")
	if len(before) == 0 {
		t.Fatal("nothing holds the fork's marker before the delete")
	}
	_, err = d.Purge(ctx, persistence.PurgeSpec{Session: parent.Session, Branches: []messages.BranchID{parent.Branch}})
	if !errors.Is(err, persistence.ErrInUse) {
		t.Fatalf("Purge(a branch with a fork) = %v, want ErrInUse", err)
	}
	if _, err := d.Head(ctx, parent.Branch); err != nil {
		t.Fatalf("after a refused delete: %v", err)
	}
	res, err := d.Purge(ctx, persistence.PurgeSpec{Session: parent.Session, Branches: []messages.BranchID{fork.Branch}, Actors: []string{fork.Actor}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Nodes != 1 {
		t.Errorf("Purge(fork) deleted %d nodes, want 1 (its own)", res.Nodes)
	}
	if got := e.Holding(t, "FORK-GONE-5c7e"); len(got) > 0 {
		t.Errorf("after the delete the fork's marker is in %v", got)
	}
	chain, err := d.Chain(ctx, parent.Turns[1])
	if err != nil || len(chain) != 2 {
		t.Fatalf("Chain(parent) = %d, %v", len(chain), err)
	}
	for _, tu := range chain {
		if _, err := d.Blob(ctx, tu.PayloadHash); err != nil {
			t.Errorf("Blob(parent turn %s) = %v", tu.ID, err)
		}
	}
	bs, err := d.Branches(ctx, parent.Session)
	if err != nil || len(bs) != 1 || bs[0].ID != parent.Branch {
		t.Errorf("Branches = %+v, %v; want the parent alone", bs, err)
	}
	// The session's first branch cannot go alone.
	if _, err := d.Purge(ctx, persistence.PurgeSpec{Session: parent.Session, Branches: []messages.BranchID{parent.Branch}}); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Errorf("Purge(the last branch) = %v, want ErrInvalidArgument", err)
	}
}

// testPurgeSessionsInOneDrop deletes two sessions in one call: neither's
// marker is left in any file (any table), a kept session's is; a batch naming a
// session that does not exist deletes nothing.
func testPurgeSessionsInOneDrop(t *testing.T, d DB, e Env) {
	ctx := context.Background()
	a, b, kept := "MARKER-RET-A-19c0", "MARKER-RET-B-7e22", "MARKER-RET-KEPT-3d11"
	fa := WriteSession(t, d, a, 2)
	fb := WriteSession(t, d, b, 3)
	fk := WriteSession(t, d, kept, 1)
	// An activity row each, which goes with its session.
	for _, f := range []SessionFixture{fa, fb} {
		if _, err := d.Commit(ctx, &persistence.Tx{Touched: []persistence.SessionTouch{{Session: f.Session, At: time.Now()}}}); err != nil {
			t.Fatal(err)
		}
	}
	missing := messages.NewID[messages.SessionID](time.Now())
	_, err := d.PurgeSessions(ctx, []persistence.PurgeSpec{{Session: fa.Session, DeleteSession: true}, {Session: missing, DeleteSession: true}})
	if !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("PurgeSessions(with a missing session) = %v, want ErrNotFound", err)
	}
	if _, err := d.Session(ctx, fa.Session); err != nil {
		t.Fatalf("a failed batch deleted session a: %v", err)
	}
	if _, err := d.PurgeSessions(ctx, []persistence.PurgeSpec{{Session: fa.Session, DeleteSession: true}, {Session: fa.Session, DeleteSession: true}}); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Errorf("PurgeSessions(a twice) = %v, want ErrInvalidArgument", err)
	}
	res, err := d.PurgeSessions(ctx, []persistence.PurgeSpec{
		{Session: fa.Session, DeleteSession: true, Actors: []string{fa.Actor}},
		{Session: fb.Session, DeleteSession: true, Actors: []string{fb.Actor}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Turns != 2 || res[1].Turns != 3 || res[0].Blobs != 5 {
		t.Errorf("PurgeSessions = %+v, want 2 and 3 turns, 5 blobs on the first", res)
	}
	for _, m := range []string{a, b} {
		if got := e.Holding(t, m); len(got) > 0 {
			t.Errorf("after the delete %s is still in %v", m, got)
		}
	}
	for _, f := range []SessionFixture{fa, fb} {
		if _, err := d.SessionActivity(ctx, f.Session); !errors.Is(err, persistence.ErrNotFound) {
			t.Errorf("SessionActivity(deleted) = %v, want ErrNotFound", err)
		}
	}
	if got := e.Holding(t, kept); len(got) == 0 {
		t.Errorf("no file holds the kept session's %s", kept)
	}
	if _, err := d.Session(ctx, fk.Session); err != nil {
		t.Errorf("kept session: %v", err)
	}
}
