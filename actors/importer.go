package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// importer records on the branch what happened elsewhere: a session's
// export being imported (items, done) and exchanges recorded as finished
// turns (exchanges). While an import builds the branch (importing, its
// session not committed yet) its states come from the export: the
// fold policy asks for no summary and no turn is prepared until it ends.
type importer struct {
	c     *branchCore
	msgs  *messageCache
	index *indexJobs
	// run runs the actor's effects; modelEvents selects a model (the
	// turn loop's).
	run         func(ctx actor.Context, effects []core.Effect)
	modelEvents func(name string) ([]messages.BranchEvent, error)

	importing bool
	// stashing is set while an import records turns in held writes: the
	// indexer reads a turn's neighbours from the store, so their index
	// jobs (stashed) go once the import's writes are committed (stash).
	stashing bool
	stashed  []core.Effect
	// ix indexes the turns an import folds (indexNow), keeping the last
	// ones' terms for the next.
	ix *indexer
}

// importItemsReq records an import's items on a branch being imported.
type importItemsReq struct{ items []ExportItem }

// importDoneReq ends a branch's import: it folds what is due from now on.
type importDoneReq struct{}

// stash holds the index jobs of the turns recorded until the returned
// func, called once they are committed, sends them; while an import
// builds the branch, it indexes them itself (indexNow).
func (imp *importer) stash(ctx actor.Context) (commit func()) {
	imp.stashing = true
	return func() {
		imp.c.flush()
		imp.stashing = false
		effs := imp.stashed
		imp.stashed = nil
		if imp.importing {
			effs = imp.indexNow(ctx, effs)
		}
		imp.run(ctx, effs)
	}
}

// items records items in order, all committed together before it
// returns. Each is checked before it is recorded; an item refused ends
// the import (which is dropped), with what came before it committed.
func (imp *importer) items(ctx actor.Context, items []ExportItem) error {
	if !imp.importing {
		return fmt.Errorf("%w: branch %s is not being imported", ErrImport, imp.c.id)
	}
	commit := imp.stash(ctx)
	defer func() {
		commit()
		imp.msgs.prune(&imp.c.b, messages.TurnID{})
	}()
	now := imp.c.now()
	for _, it := range items {
		var err error
		switch {
		case it.Turn != nil:
			err = imp.turn(ctx, *it.Turn, now)
		case it.State != nil:
			err = imp.state(ctx, *it.State, now)
		case it.Head != nil:
			err = imp.head(ctx, *it.Head, now)
		default:
			err = fmt.Errorf("%w: an empty item", ErrImport)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// head selects the branch's pins, model and memory tools setting as its
// export's head line gives them.
func (imp *importer) head(ctx actor.Context, h ExportHead, now time.Time) error {
	if err := imp.pins(ctx, h.Pinned, now); err != nil {
		return err
	}
	var evs []messages.BranchEvent
	if h.Model != imp.c.b.Model {
		var err error
		if evs, err = imp.modelEvents(h.Model); err != nil {
			return err
		}
	}
	tools, err := imp.c.b.SelectMemoryTools(h.MemoryTools, now)
	if err != nil {
		return err
	}
	for _, ev := range append(evs, tools...) {
		imp.c.persistHeld(ctx, ev, imp.c.txFor(ev))
	}
	return nil
}

func (imp *importer) turn(ctx actor.Context, t ExportTurn, now time.Time) error {
	field := fmt.Sprintf("turn %d", t.Seq)
	if t.Seq != imp.c.b.TurnSeq+1 {
		return fmt.Errorf("%w: %s: seq %d, want %d (the next)", ErrImport, field, t.Seq, imp.c.b.TurnSeq+1)
	}
	if t.User.Role != messages.RoleUser || len(t.User.Blocks) == 0 {
		return fmt.Errorf("%w: %s: user: a message of role user with content, got role %s and %d blocks",
			ErrImport, field, t.User.Role, len(t.User.Blocks))
	}
	user, err := t.User.MarshalJSON()
	if err != nil {
		return fmt.Errorf("%w: %s: user: %w", ErrImport, field, err)
	}
	if err := imp.c.rows.CheckPayload(field+": user", len(user)); err != nil {
		return err
	}
	turn := messages.NewID[messages.TurnID](now)
	tip := imp.c.b.Tip
	userAppend := persistence.TxAppend{Branch: imp.c.id, ID: turn, Req: persistence.AppendRequest{Payload: user,
		TypeTag: TypeUserMessage, Codec: CodecJSON, ExpectParent: &tip}}
	if t.Failed {
		if t.Reason == "" {
			return fmt.Errorf("%w: %s: a failed turn needs its reason", ErrImport, field)
		}
		evs, err := imp.c.b.Submit(turn, now)
		if err != nil {
			return err
		}
		tx := imp.c.txFor(evs[0])
		tx.Appends = []persistence.TxAppend{userAppend}
		imp.c.persistHeld(ctx, evs[0], tx) // its PrepareContext is not run while importing
		if evs, err = imp.c.b.Fail(turn, t.Code, t.Reason, now); err != nil {
			return err
		}
		imp.c.persistHeld(ctx, evs[0], imp.c.txFor(evs[0]))
		return nil
	}
	if t.Reply.Role != messages.RoleAssistant {
		return fmt.Errorf("%w: %s: reply: role %s, want assistant", ErrImport, field, t.Reply.Role)
	}
	reply, err := t.Reply.MarshalJSON()
	if err != nil {
		return fmt.Errorf("%w: %s: reply: %w", ErrImport, field, err)
	}
	if err := imp.c.rows.CheckPayload(field+": reply", len(reply)); err != nil {
		return err
	}
	replyID := messages.NewID[messages.NodeID](now)
	evs, err := imp.c.b.Record(turn, replyID, now)
	if err != nil {
		return err
	}
	tx := imp.c.txFor(evs[0])
	tx.Appends = []persistence.TxAppend{userAppend, {Branch: imp.c.id, ID: replyID, Req: persistence.AppendRequest{Payload: reply,
		TypeTag: TypeAssistantMessage, Codec: CodecJSON, ExpectParent: &turn}}}
	imp.msgs.put(turn, t.User)
	imp.msgs.put(replyID, t.Reply)
	imp.c.persistHeld(ctx, evs[0], tx)
	return nil
}

// pins makes the branch's pinned facts pinned, in order, from the
// ones it has: a fact it lacks is pinned (after the others), one it no
// longer has is unpinned, and one replaced in place is edited (it keeps
// its number and place), as the branch exported did. Limits are the
// runtime's defaults (an import replays what a branch did; the export's
// pins passed the limits when they were made, or were made before them).
func (imp *importer) pins(ctx actor.Context, pinned []string, now time.Time) error {
	live := imp.c.b.LivePins()
	persist := func(evs []messages.BranchEvent, err error) error {
		if err != nil {
			return fmt.Errorf("%w: pinned %q: %v", ErrImport, pinned, err)
		}
		for _, ev := range evs {
			imp.c.persistHeld(ctx, ev, imp.c.txFor(ev))
		}
		return nil
	}
	lim := core.PinLimits{MaxPins: 1 << 20, MaxBytes: 1 << 30} // what was pinned stays pinned
	i, j := 0, 0
	for i < len(pinned) && j < len(live) {
		switch {
		case live[j].Fact == pinned[i]:
			i, j = i+1, j+1
		case !slices.Contains(pinned[i:], live[j].Fact) &&
			!slices.ContainsFunc(live[j:], func(p messages.PinnedFact) bool { return p.Fact == pinned[i] }):
			if err := persist(imp.c.b.EditPin(live[j].ID, pinned[i], lim, now)); err != nil {
				return err
			}
			i, j = i+1, j+1
		case !slices.Contains(pinned[i:], live[j].Fact):
			if err := persist(imp.c.b.Unpin(live[j].ID, now)); err != nil {
				return err
			}
			j++
		default:
			return fmt.Errorf("%w: pinned %q: not the branch's pinned facts %q in their order, with some unpinned, edited or added", ErrImport, pinned, imp.c.b.State.Pinned)
		}
	}
	for ; j < len(live); j++ {
		if err := persist(imp.c.b.Unpin(live[j].ID, now)); err != nil {
			return err
		}
	}
	for ; i < len(pinned); i++ {
		evs, err := imp.c.b.Pin(pinned[i], lim, now)
		if err == nil && len(evs) == 0 {
			err = fmt.Errorf("%q is listed twice", pinned[i])
		}
		if err := persist(evs, err); err != nil {
			return err
		}
	}
	return nil
}

func (imp *importer) state(ctx actor.Context, s ExportState, now time.Time) error {
	if err := imp.pins(ctx, s.Pinned, now); err != nil {
		return fmt.Errorf("state %d: %w", s.Seq, err)
	}
	pending := imp.c.b.Pending()
	turns := make([]messages.TurnID, len(s.Turns))
	for i, seq := range s.Turns {
		if i >= len(pending) || pending[i].Seq != seq {
			return fmt.Errorf("%w: state %d: turns[%d]: %d is not the next pending turn", ErrImport, s.Seq, i, seq)
		}
		turns[i] = pending[i].ID
	}
	st := messages.StateCheckpoint{ID: messages.NewID[messages.StateID](now), Seq: s.Seq, Summary: s.Summary,
		Pinned: slices.Clone(imp.c.b.State.Pinned)}
	var evs []messages.BranchEvent
	var err error
	if len(turns) == 0 {
		evs, err = imp.c.b.CommitShrunk(st, imp.c.b.Epoch, now)
	} else {
		evs, err = imp.c.b.Commit(st, turns, imp.c.b.Epoch, now)
	}
	if err != nil {
		if errors.Is(err, core.ErrDuplicate) || errors.Is(err, core.ErrStaleEpoch) {
			err = fmt.Errorf("%w: %w", ErrImport, err)
		}
		return fmt.Errorf("state %d: %w", s.Seq, err)
	}
	imp.c.persistHeld(ctx, evs[0], imp.c.txFor(evs[0]))
	return nil
}

// indexNow indexes, in this actor, the turns of the Index effects among
// effs (committed, folded by an imported state) and commits their chunks
// with their TurnIndexed events before it returns: an import indexes what
// it folds batch by batch, so that indexing keeps pace with it, nothing is
// left to index when it answers, and its turns are searchable at once.
// The chunks of the batch are embedded in one call. It returns the other
// effects, and the Index effects of the turns it could not chunk (a store
// read failed), left to the indexer.
func (imp *importer) indexNow(ctx actor.Context, effs []core.Effect) []core.Effect {
	if imp.ix == nil {
		imp.ix = &indexer{rt: imp.c.rt}
	}
	type job struct {
		turn messages.TurnID
		rows []persistence.ChunkRow
		ups  []persistence.TermUpdate
	}
	var jobs []job
	var rows []persistence.ChunkRow
	var rest []core.Effect
	for i, e := range effs {
		ix, ok := e.(core.Index)
		if !ok {
			rest = append(rest, e)
			continue
		}
		t, ok := imp.c.b.Turn(ix.Turn)
		if !ok || t.Phase != messages.PhaseStateCommitted {
			continue
		}
		known := map[messages.TurnID]messages.Message{}
		imp.msgs.knownInto(known, t.ID, t.Reply)
		r, ups, err := imp.ix.chunkRows(&indexReq{known: known, branch: imp.c.id, session: imp.c.b.Session, turn: t.ID, seq: t.Seq, reply: t.Reply})
		if err != nil {
			imp.c.rt.log.Warn().Err(err).Str("branch", imp.c.id.String()).Str("turn", t.ID.String()).
				Msg("import: index left to the indexer")
			imp.ix = nil // its memory of the turns before is no longer the branch's last
			rest = append(rest, effs[i:]...)
			break
		}
		jobs = append(jobs, job{turn: t.ID, rows: r, ups: ups})
		rows = append(rows, r...)
	}
	if len(jobs) == 0 {
		return rest
	}
	// Within the request that carries the batch: an embedder that does
	// not answer leaves the chunks to full-text search, not the import
	// to time out.
	ectx, cancel := context.WithTimeout(context.Background(), min(imp.c.rt.cfg.RequestTimeout/2, time.Minute))
	defer cancel()
	vecs, err := imp.c.rt.mem.embedChunks(ectx, rows)
	if err != nil {
		imp.c.rt.log.Warn().Err(err).Str("branch", imp.c.id.String()).Int("chunks", len(rows)).
			Msg("import: chunks stored without vectors (full-text search only)")
	}
	byChunk := make(map[messages.ChunkID]persistence.VectorRow, len(vecs))
	for _, v := range vecs {
		byChunk[v.Chunk] = v
	}
	now := imp.c.now()
	for _, j := range jobs {
		evs, err := imp.c.b.MarkIndexed(j.turn, len(j.rows), now)
		if err != nil {
			imp.c.rt.log.Warn().Err(err).Str("branch", imp.c.id.String()).Msg("import: mark indexed")
			continue
		}
		done := &indexDone{turn: j.turn, rows: j.rows, ups: j.ups}
		for _, r := range j.rows {
			if v, ok := byChunk[r.ID]; ok {
				done.vecs = append(done.vecs, v)
			}
		}
		for i, ev := range evs {
			tx := imp.c.txFor(ev)
			if i == 0 {
				tx.Chunks, tx.Vectors, tx.TermUpdates = done.rows, done.vecs, done.ups
				imp.index.hold(done)
			}
			imp.c.persistHeld(ctx, ev, tx)
		}
	}
	imp.c.flush() // the chunks go into the retrieval index (committed)
	return rest
}

// exchanges records exchanges as finished turns (TurnRecorded), all
// committed together before it returns; they are then folded and indexed
// like any other turn.
func (imp *importer) exchanges(ctx actor.Context, exchanges []Exchange, key *persistence.IdempotencyRow) ([]messages.PendingTurn, error) {
	if t, ok := imp.c.b.InFlight(); ok {
		return nil, &core.BusyError{Turn: t.ID, Phase: t.Phase}
	}
	payloads := make([][2][]byte, len(exchanges))
	for i, x := range exchanges { // every payload checked before anything is stored
		var err error
		if payloads[i][0], err = x.User.MarshalJSON(); err != nil {
			return nil, fmt.Errorf("exchanges[%d].user: %w", i, err)
		}
		if payloads[i][1], err = x.Reply.MarshalJSON(); err != nil {
			return nil, fmt.Errorf("exchanges[%d].reply: %w", i, err)
		}
		for j, field := range [2]string{"user", "reply"} {
			if err := imp.c.rows.CheckPayload(fmt.Sprintf("exchanges[%d].%s", i, field), len(payloads[i][j])); err != nil {
				return nil, err
			}
		}
	}
	now := imp.c.now()
	ids := make([]messages.PendingTurn, 0, len(exchanges))
	commit := imp.stash(ctx)
	defer func() { commit() }() // on an error: what was recorded is committed
	for i, x := range exchanges {
		turn, reply := messages.NewID[messages.TurnID](now), messages.NewID[messages.NodeID](now)
		tip := imp.c.b.Tip
		evs, err := imp.c.b.Record(turn, reply, now)
		if err != nil {
			return nil, err
		}
		tx := imp.c.txFor(evs[0])
		tx.Appends = []persistence.TxAppend{
			{Branch: imp.c.id, ID: turn, Req: persistence.AppendRequest{Payload: payloads[i][0], TypeTag: TypeUserMessage,
				Codec: CodecJSON, ExpectParent: &tip}},
			{Branch: imp.c.id, ID: reply, Req: persistence.AppendRequest{Payload: payloads[i][1], TypeTag: TypeAssistantMessage,
				Codec: CodecJSON, ExpectParent: &turn}},
		}
		imp.msgs.put(turn, x.User)
		imp.msgs.put(reply, x.Reply)
		if key != nil && i == len(exchanges)-1 {
			k := *key
			if k.Scope == persistence.ScopeTurn {
				k.Turn = turn // a recorded exchange's key names its turn, as a submitted turn's does
			}
			tx.Keys = []persistence.IdempotencyRow{k} // with the last turn: the import is done
		}
		imp.c.persistHeld(ctx, evs[0], tx)
		ids = append(ids, messages.PendingTurn{Turn: turn, Seq: imp.c.b.TurnSeq, Reply: reply})
	}
	commit()
	commit = func() {}
	imp.msgs.prune(&imp.c.b, messages.TurnID{})
	return ids, nil
}

// done ends the import that builds the branch: it folds what is
// due from now on.
func (imp *importer) done(ctx actor.Context) {
	if !imp.importing {
		return
	}
	imp.importing = false
	if s, ok := imp.c.b.FoldDue(core.FoldAuto); ok {
		imp.run(ctx, []core.Effect{s})
	}
}
