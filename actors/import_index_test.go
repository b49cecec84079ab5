package actors

import (
	"fmt"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/supervision"
)

// An import indexes the turns its states fold batch by batch, before it
// answers: when Commit returns, every folded turn is indexed, nothing is
// counted in the backlog, and the branch's index is in memory with every
// chunk, so that the first search (the first turn's retrieval) reads
// none from the store.
func TestImportIndexesAsItGoes(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Fold = &core.Policy{K: 1000, B: 1000} // no fold of its own after the import
	// An Add of 256 items indexes inline; under -race on a loaded machine
	// that can take longer than testConfig's 10 s.
	cfg.RequestTimeout = time.Minute
	r := openRuntime(t, cfg)
	defer r.Close()
	im := r.BeginImport("imported", time.Time{})
	b, err := im.AddBranch(bg, ExportBranch{Label: "main", Parent: -1})
	if err != nil {
		t.Fatal(err)
	}
	const n, every = 600, 5
	var batch []ExportItem
	var folded []uint64
	states := uint64(0)
	for i := 1; i <= n; i++ {
		batch = append(batch, ExportItem{Turn: &ExportTurn{Seq: uint64(i),
			User:  messages.NewMessage(messages.RoleUser, messages.Text{Text: fmt.Sprintf("turn %d: the codeword is tern%dmoss", i, i)}),
			Reply: messages.NewMessage(messages.RoleAssistant, messages.Text{Text: "noted"})}})
		if folded = append(folded, uint64(i)); len(folded) == every && i < n {
			states++
			batch = append(batch, ExportItem{State: &ExportState{Seq: states, Summary: fmt.Sprint("summary ", states), Turns: folded}})
			folded = nil
		}
		if len(batch) >= 256 || i == n {
			if err := im.Add(bg, batch); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	if err := im.Add(bg, []ExportItem{{Head: &ExportHead{}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := im.Commit(bg, 0); err != nil {
		t.Fatal(err)
	}
	info, err := r.Inspect(bg, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Committed != n-every || info.Indexed != info.Committed {
		t.Errorf("after Commit: %d turns folded, %d indexed; want %d, all indexed", info.Committed, info.Indexed, n-every)
	}
	if got := r.IndexBacklog(); got != 0 {
		t.Errorf("IndexBacklog() = %d after the import, want 0", got)
	}
	stored := 0
	if err := r.db.BranchChunks(bg, b.ID, func(persistence.ChunkDoc) error { stored++; return nil }); err != nil {
		t.Fatal(err)
	}
	r.mem.mu.Lock()
	pt, loaded := r.mem.parts[b.ID]
	r.mem.mu.Unlock()
	if !loaded {
		t.Fatalf("the imported branch's index is not in memory: its first search reads %d chunks from the store", stored)
	}
	<-pt.ready
	if pt.p.Len() != stored || stored < n-every {
		t.Errorf("the index in memory holds %d chunks, the store %d (at least %d turns' worth)", pt.p.Len(), stored, n-every)
	}
	hits, err := r.Search(bg, b.ID, "tern3moss", nil)
	if err != nil || len(hits) == 0 || hits[0].Chunk.SourceTurn != turnOf(t, r, b.ID, 3) {
		t.Errorf("Search(tern3moss) = %+v, %v; want turn 3 first", hits, err)
	}
}

// turnOf returns the id of branch's turn seq.
func turnOf(t *testing.T, r *Runtime, branch messages.BranchID, seq uint64) messages.TurnID {
	t.Helper()
	rows, err := r.db.TurnRows(bg, branch, seq, 1)
	if err != nil || len(rows) != 1 {
		t.Fatalf("turn %d: %v %v", seq, rows, err)
	}
	return rows[0].ID
}

// IndexBacklog counts a folded turn whose index jobs were lost until it
// is indexed, across a restart: the next start's activation counts it
// again, and its index brings the count back to 0, never below.
func TestIndexBacklogAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, dir, newEvents())
	cfg.Fold = &core.Policy{} // fold every turn as soon as it is finalized
	r := openRuntime(t, cfg)
	_, b, err := r.CreateSession(bg, "backlog")
	if err != nil {
		t.Fatal(err)
	}
	for range maxLostJobs + 1 { // every index job lost: left to the next activation
		r.kills.Arm(supervision.KindIndexer)
	}
	s, err := r.Submit(bg, b.ID, "remember the deploy target is eu-west-1")
	if err != nil {
		t.Fatal(err)
	}
	waitTurn(t, s)
	deadline := time.Now().Add(20 * time.Second)
	for r.kills.Killed(supervision.KindIndexer) < maxLostJobs+1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d index jobs lost, want %d", r.kills.Killed(supervision.KindIndexer), maxLostJobs+1)
		}
		time.Sleep(time.Millisecond) // polling the kill count, with a deadline
	}
	info, err := r.Inspect(bg, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Committed != 1 || info.Indexed != 0 || r.IndexBacklog() != 1 {
		t.Fatalf("%d folded, %d indexed, IndexBacklog() = %d; want 1, 0 and 1", info.Committed, info.Indexed, r.IndexBacklog())
	}
	r.Close()

	r = openRuntime(t, testConfig(t, dir, newEvents())) // the start activates the branch: it indexes the turn
	defer r.Close()
	if err := r.Settle(bg, b.ID); err != nil {
		t.Fatal(err)
	}
	if got := r.IndexBacklog(); got != 0 {
		t.Errorf("IndexBacklog() = %d once the turn is indexed after the restart, want 0", got)
	}
	if err := r.Stop(bg, b.ID); err != nil {
		t.Fatal(err)
	}
	if got := r.IndexBacklog(); got != 0 {
		t.Errorf("IndexBacklog() = %d after the branch stopped, want 0", got)
	}
}
