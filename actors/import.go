package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/contextinfinity/ctxinf/export"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// A session's export is, per branch in creation order (parents before
// their forks), the branch (ExportBranch), then its own turns and the
// states that fold them in the order they happened (ExportTurn,
// ExportState), then its head (ExportHead). Positions stand for ids
// (turn seqs, state seqs, transcript depths, branch indexes), so that an
// import rebuilds the same DAG with new ids.

// The parts of an export are package export's (export.Item and what it
// holds), so that a program reads and writes exports without the
// runtime.
type (
	ExportBranch = export.Branch
	ExportTurn   = export.Turn
	ExportState  = export.State
	ExportHead   = export.Head
	ExportItem   = export.Item
)

// ExportSession calls fn with every part of session id, branch by branch
// (see ExportBranch), reading a page at a time: memory stays that of a
// page however long the session. Each branch is exported as it stood
// when its turn came: a turn in flight then (the last) is left out. It
// stops at fn's first error, which it returns.
func (r *Runtime) ExportSession(ctx context.Context, id messages.SessionID, fn func(ExportItem) error) error {
	rows, err := r.db.Branches(ctx, id)
	if err != nil {
		return err
	}
	slices.SortFunc(rows, func(a, b persistence.BranchRow) int { return a.ID.Compare(b.ID) }) // creation order
	index := map[messages.BranchID]int{}
	for i, b := range rows {
		if !b.Parent.IsZero() {
			if _, ok := index[b.Parent]; !ok {
				return fmt.Errorf("export session %s: branch %s: parent %s is not an earlier branch of the session", id, b.ID, b.Parent)
			}
		}
		index[b.ID] = i
		if err := r.exportBranch(ctx, b, index, fn); err != nil {
			return fmt.Errorf("export session %s: branch %s: %w", id, b.ID, err)
		}
	}
	return nil
}

// exportPage is how many turn or state rows an export reads at a time.
const exportPage = 256

func (r *Runtime) exportBranch(ctx context.Context, b persistence.BranchRow, index map[messages.BranchID]int, fn func(ExportItem) error) error {
	info, err := r.Inspect(ctx, b.ID) // the branch as its turn comes: what is exported
	if err != nil {
		return err
	}
	first, err := r.db.StateRows(ctx, b.ID, 0, 1)
	if err != nil {
		return err
	}
	if len(first) == 0 {
		return fmt.Errorf("%w: no base state row", persistence.ErrCorrupt)
	}
	base := first[0]
	eb := ExportBranch{ID: b.ID, Label: b.Label, Created: b.Created, Parent: -1, ForkSeq: b.ForkSeq,
		Base: ExportState{Seq: base.Seq, Summary: base.Summary, Pinned: base.Pinned}}
	seqOf := func(turn messages.TurnID) (uint64, error) {
		row, err := r.db.TurnRow(ctx, b.ID, turn)
		return row.Seq, err
	}
	if !b.Parent.IsZero() {
		eb.Parent = index[b.Parent]
		at, err := r.db.Node(ctx, b.ForkAt)
		if err != nil {
			return fmt.Errorf("fork point %s: %w", b.ForkAt, err)
		}
		eb.ForkAtDepth, eb.TipDepth = at.Depth, at.Depth
		// The tip is the reply after the fork point when the fork shares
		// it with its parent (a fork after a finished turn).
		mine, err := r.db.Range(ctx, b.ID, at.Depth+1, 1)
		if err != nil {
			return err
		}
		theirs, err := r.db.Range(ctx, b.Parent, at.Depth+1, 1)
		if err != nil {
			return err
		}
		if len(mine.Nodes) == 1 && len(theirs.Nodes) == 1 && mine.Nodes[0].ID == theirs.Nodes[0].ID {
			eb.TipDepth++
		}
		for from := uint64(0); from <= b.ForkSeq; {
			carried, err := r.db.TurnRows(ctx, b.ID, from, exportPage)
			if err != nil {
				return err
			}
			if len(carried) == 0 {
				break
			}
			for _, t := range carried {
				if t.Seq <= b.ForkSeq {
					eb.Carried = append(eb.Carried, t.Seq)
				}
				from = t.Seq + 1
			}
		}
	}
	if err := fn(ExportItem{Branch: &eb}); err != nil {
		return err
	}
	// The states after the base, each sent after the last turn it folds
	// (a shrunk one, folding none, right after the state before it).
	var states []persistence.StateRow
	nextState := base.Seq + 1
	var stateTurns []uint64
	loadState := func() (bool, error) {
		if nextState > info.State.Seq {
			return false, nil
		}
		if len(states) == 0 {
			var err error
			if states, err = r.db.StateRows(ctx, b.ID, nextState, exportPage); err != nil {
				return false, err
			}
			if len(states) == 0 || states[0].Seq != nextState {
				return false, fmt.Errorf("%w: state_seq %d missing", persistence.ErrCorrupt, nextState)
			}
		}
		stateTurns = stateTurns[:0]
		for _, t := range states[0].Turns {
			seq, err := seqOf(t)
			if err != nil {
				return false, fmt.Errorf("state %d: turn %s: %w", states[0].Seq, t, err)
			}
			stateTurns = append(stateTurns, seq)
		}
		return true, nil
	}
	emitStates := func(upTo uint64) error {
		for {
			ok, err := loadState()
			if err != nil || !ok {
				return err
			}
			if n := len(stateTurns); n > 0 && stateTurns[n-1] > upTo {
				return nil
			}
			s := states[0]
			if err := fn(ExportItem{State: &ExportState{Seq: s.Seq, Summary: s.Summary, Pinned: s.Pinned,
				Turns: slices.Clone(stateTurns)}}); err != nil {
				return err
			}
			states = states[1:]
			nextState++
		}
	}
	if err := emitStates(b.ForkSeq); err != nil {
		return err
	}
	for from := b.ForkSeq + 1; from <= info.TurnSeq; {
		rows, err := r.db.TurnRows(ctx, b.ID, from, exportPage)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			break
		}
		for _, t := range rows {
			if t.Seq > info.TurnSeq {
				break
			}
			from = t.Seq + 1
			et := ExportTurn{Seq: t.Seq}
			switch {
			case t.Phase == messages.PhaseFailed:
				et.Failed, et.Code, et.Reason = true, t.Code, t.Reason
			case t.Reply.IsZero():
				from = info.TurnSeq + 1 // in flight: the last turn, left out
				continue
			}
			if et.User, err = readMessage(r.db, t.ID); err != nil {
				return fmt.Errorf("turn %d: %w", t.Seq, err)
			}
			if !et.Failed {
				if et.Reply, err = readMessage(r.db, t.Reply); err != nil {
					return fmt.Errorf("turn %d: reply: %w", t.Seq, err)
				}
			}
			if err := fn(ExportItem{Turn: &et}); err != nil {
				return err
			}
			if err := emitStates(t.Seq); err != nil {
				return err
			}
		}
	}
	if ok, err := loadState(); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%w: state %d folds turns past the branch's last", persistence.ErrCorrupt, states[0].Seq)
	}
	return fn(ExportItem{Head: &ExportHead{Pinned: info.State.Pinned, Model: info.Model, MemoryTools: info.MemoryTools}})
}

// SessionImport builds a session from an export's parts, hidden until
// Commit: nothing lists the session before, and a crash before leaves
// no session (Open drops what an import cut short left, see
// persistence.ImportRow). Its methods are called from one goroutine.
type SessionImport struct {
	uncertain bool // a request's outcome was left open (unsure)
	// Key, if set, is an idempotency key's row committed with the
	// session (Commit fills in its session and branch).
	Key      *persistence.IdempotencyRow
	rt       *Runtime
	session  persistence.SessionRow
	branches []persistence.BranchRow
	ended    bool
	err      error // no session id this runtime owns (a cluster forming)
}

// BeginImport starts an import of a session titled title created at
// created (zero: now), the default tenant's. Nothing is stored until
// the first branch.
func (r *Runtime) BeginImport(title string, created time.Time) *SessionImport {
	return r.BeginImportFor("", title, created)
}

// BeginImportFor is BeginImport of a session tenant owns ("" is
// persistence.DefaultTenant).
func (r *Runtime) BeginImportFor(tenant, title string, created time.Time) *SessionImport {
	now := r.cfg.Now()
	if created.IsZero() {
		created = now
	}
	if tenant == persistence.DefaultTenant {
		tenant = "" // as CreateSessionFor stores it
	}
	// In a cluster, under an id this member owns: the import's branch
	// actors run here.
	id, err := r.ownedSessionID(func() messages.SessionID { return messages.NewID[messages.SessionID](now) })
	return &SessionImport{rt: r, session: persistence.SessionRow{ID: id, Title: title, Created: created.UTC(), Tenant: tenant},
		err: err}
}

// ErrImport is returned for an import whose parts do not fit together.
var ErrImport = fmt.Errorf("%w: import", persistence.ErrInvalidArgument)

// Branches returns the branches imported so far, in order.
func (im *SessionImport) Branches() []persistence.BranchRow { return im.branches }

// AddBranch creates the next branch of the session (see ExportBranch).
func (im *SessionImport) AddBranch(ctx context.Context, eb ExportBranch) (persistence.BranchRow, error) {
	r := im.rt
	if im.err != nil {
		return persistence.BranchRow{}, im.err
	}
	if im.ended {
		return persistence.BranchRow{}, fmt.Errorf("%w: ended", ErrImport)
	}
	if err := r.db.CheckSpace(); err != nil {
		return persistence.BranchRow{}, err
	}
	now := r.cfg.Now()
	created := eb.Created
	if created.IsZero() {
		created = now
	}
	row := persistence.BranchRow{ID: messages.NewID[messages.BranchID](now), Session: im.session.ID, Label: eb.Label,
		Created: created.UTC()}
	ev := messages.BranchCreated{Session: im.session.ID, Branch: row.ID, At: now.UTC(),
		State: messages.StateCheckpoint{Seq: eb.Base.Seq, Summary: eb.Base.Summary, Pinned: eb.Base.Pinned}}
	switch n := len(im.branches); {
	case n == 0 && eb.Parent != -1:
		return row, fmt.Errorf("%w: the first branch has parent %d, want none (-1)", ErrImport, eb.Parent)
	case n > 0 && (eb.Parent < 0 || eb.Parent >= n):
		return row, fmt.Errorf("%w: branch %d: parent %d, want one of the branches before it (0 to %d)", ErrImport, n, eb.Parent, n-1)
	case n == 0:
		if eb.Base.Seq != 0 || eb.Base.Summary != "" || len(eb.Base.Pinned) != 0 || eb.ForkSeq != 0 || len(eb.Carried) > 0 {
			return row, fmt.Errorf("%w: the first branch starts from a state or a fork point, want neither", ErrImport)
		}
		ev.State.ID = messages.NewID[messages.StateID](now)
	default:
		if err := im.forkPoint(ctx, &ev, &row, eb); err != nil {
			return row, fmt.Errorf("branch %d: %w", n, err)
		}
	}
	req := &createReq{ev: ev, row: row, importing: true}
	if len(im.branches) == 0 {
		req.imp = &persistence.ImportRow{Session: im.session.ID, Started: now.UTC()}
	}
	if _, err := r.ask(ctx, row.ID, req); err != nil {
		im.unsure(err)
		return row, fmt.Errorf("import branch %d: %w", len(im.branches), err)
	}
	im.branches = append(im.branches, row)
	return row, nil
}

// forkPoint fills in the fork of eb from its imported parent.
func (im *SessionImport) forkPoint(ctx context.Context, ev *messages.BranchCreated, row *persistence.BranchRow, eb ExportBranch) error {
	db := im.rt.db
	parent := im.branches[eb.Parent].ID
	node := func(depth uint64) (messages.NodeID, error) {
		p, err := db.Range(ctx, parent, depth, 1)
		if err != nil {
			return messages.TurnID{}, err
		}
		if len(p.Nodes) != 1 {
			return messages.NodeID{}, fmt.Errorf("%w: no transcript node at depth %d of branch %d", ErrImport, depth, eb.Parent)
		}
		return p.Nodes[0].ID, nil
	}
	if eb.TipDepth != eb.ForkAtDepth && eb.TipDepth != eb.ForkAtDepth+1 {
		return fmt.Errorf("%w: tip depth %d, want the fork point's depth %d or the next", ErrImport, eb.TipDepth, eb.ForkAtDepth)
	}
	var err error
	if ev.ForkAt, err = node(eb.ForkAtDepth); err != nil {
		return err
	}
	if ev.Tip, err = node(eb.TipDepth); err != nil {
		return err
	}
	if eb.ForkSeq == 0 {
		return fmt.Errorf("%w: fork seq 0: a fork starts after a turn", ErrImport)
	}
	ev.Parent, ev.TurnSeq = parent, eb.ForkSeq
	st, err := db.StateRow(ctx, parent, eb.Base.Seq)
	if err != nil {
		return fmt.Errorf("%w: base state %d: not a state of branch %d", ErrImport, eb.Base.Seq, eb.Parent)
	}
	if st.Summary != eb.Base.Summary {
		return fmt.Errorf("%w: base state %d: its summary differs from branch %d's state %d", ErrImport, eb.Base.Seq, eb.Parent, st.Seq)
	}
	ev.State.ID = st.ID
	ev.Window = windowAt(ctx, db, parent, st.Seq)
	for _, seq := range eb.Carried {
		rows, err := db.TurnRows(ctx, parent, seq, 1)
		if err != nil {
			return err
		}
		if len(rows) != 1 || rows[0].Seq != seq || rows[0].Reply.IsZero() || rows[0].Phase == messages.PhaseFailed {
			return fmt.Errorf("%w: carried turn %d: not a finished turn of branch %d", ErrImport, seq, eb.Parent)
		}
		ev.Pending = append(ev.Pending, messages.PendingTurn{Turn: rows[0].ID, Seq: seq, Reply: rows[0].Reply})
	}
	row.Parent, row.ForkAt, row.ForkSeq = parent, ev.ForkAt, eb.ForkSeq
	return nil
}

// Add records items (turns, states and at most one head, in order) on
// the last branch added, in one commit.
func (im *SessionImport) Add(ctx context.Context, items []ExportItem) error {
	if im.ended || len(im.branches) == 0 {
		return fmt.Errorf("%w: no branch to add to", ErrImport)
	}
	if err := im.rt.db.CheckSpace(); err != nil {
		return err
	}
	b := im.branches[len(im.branches)-1]
	if _, err := im.rt.ask(ctx, b.ID, &importItemsReq{items: items}); err != nil {
		im.unsure(err)
		return fmt.Errorf("import branch %d: %w", len(im.branches)-1, err)
	}
	return nil
}

// Commit makes the session visible, with active (an index) as its
// active branch, in one commit; then its branches fold and index what
// the import left pending like any other.
func (im *SessionImport) Commit(ctx context.Context, active int) (persistence.SessionRow, error) {
	r := im.rt
	if im.ended || len(im.branches) == 0 {
		return im.session, fmt.Errorf("%w: no branch to commit", ErrImport)
	}
	if active < 0 || active >= len(im.branches) {
		return im.session, fmt.Errorf("%w: active branch %d, want 0 to %d", ErrImport, active, len(im.branches)-1)
	}
	im.session.ActiveBranch = im.branches[active].ID
	tx := &persistence.Tx{Sessions: []persistence.SessionRow{im.session}, DoneImports: []messages.SessionID{im.session.ID}}
	if im.Key != nil {
		k := *im.Key
		k.Session, k.Branch = im.session.ID, im.session.ActiveBranch
		tx.Keys = []persistence.IdempotencyRow{k}
	}
	// Not cancelled with the request: a commit queued before the client
	// went away still lands, and must not then be aborted.
	if _, err := r.db.Commit(context.WithoutCancel(ctx), tx); err != nil {
		return im.session, fmt.Errorf("commit import of session %s: %w", im.session.ID, err)
	}
	im.ended = true
	for _, b := range im.branches {
		if _, err := r.ask(ctx, b.ID, &importDoneReq{}); err != nil {
			// Committed: its next activation folds what is due.
			r.log.Warn().Err(err).Str("branch", b.ID.String()).Msg("import: end")
		}
	}
	return im.session, nil
}

// unsure notes that a request to a branch failed in a way that leaves
// open whether it was carried out (it timed out, or its caller went
// away): its writes may land after Abort.
func (im *SessionImport) unsure(err error) {
	var te *TimeoutError
	if errors.As(err, &te) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrInterrupted) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		im.uncertain = true
	}
}

// Abort drops what the import wrote, unless it committed: every branch
// of the session (one a request gave up on included). When a request's
// outcome was left open, its writes may come after the drop: the
// import's marker then stays, and the next Open drops what they left.
func (im *SessionImport) Abort(ctx context.Context) error {
	if im.ended {
		return nil
	}
	im.ended = true
	bs, err := im.rt.db.Branches(ctx, im.session.ID)
	if err != nil {
		return err
	}
	for _, b := range im.branches {
		if !slices.ContainsFunc(bs, func(x persistence.BranchRow) bool { return x.ID == b.ID }) {
			bs = append(bs, b)
		}
	}
	if len(bs) == 0 && !im.uncertain {
		return nil
	}
	for _, b := range bs {
		if err := im.rt.Stop(ctx, b.ID); err != nil {
			im.rt.log.Warn().Err(err).Str("branch", b.ID.String()).Msg("import: stop")
		}
	}
	return im.rt.dropImport(ctx, im.session.ID, bs, !im.uncertain)
}

// dropImport deletes the rows that make the branches of an unfinished
// import reachable (their rows and jobs) and, if marker, its marker.
func (r *Runtime) dropImport(ctx context.Context, session messages.SessionID, branches []persistence.BranchRow, marker bool) error {
	jobs, err := r.db.Jobs(ctx)
	if err != nil {
		return err
	}
	tx := &persistence.Tx{DropBranches: branches}
	if marker {
		tx.DoneImports = []messages.SessionID{session}
	}
	for _, j := range jobs {
		if slices.ContainsFunc(branches, func(b persistence.BranchRow) bool { return b.ID == j.Branch }) {
			tx.DoneJobs = append(tx.DoneJobs, persistence.JobKey{Type: j.Type, Turn: j.Turn})
		}
	}
	if _, err := r.db.Commit(ctx, tx); err != nil {
		return fmt.Errorf("drop import of session %s: %w", session, err)
	}
	ids := make([]messages.BranchID, len(branches))
	for i, b := range branches {
		ids[i] = b.ID
	}
	r.mem.forget(ids)
	return nil
}

// dropCutImports drops, at Open, what the imports a crash cut short
// left: no session lists them, and their branches are never activated.
func (r *Runtime) dropCutImports(ctx context.Context) error {
	imps, err := r.db.Imports(ctx)
	if err != nil {
		return err
	}
	for _, im := range imps {
		bs, err := r.db.Branches(ctx, im.Session)
		if err != nil {
			return err
		}
		if err := r.dropImport(ctx, im.Session, bs, true); err != nil {
			return err
		}
		r.log.Warn().Str("session", im.Session.String()).Int("branches", len(bs)).Time("started", im.Started).
			Msg("dropped an import cut short by a stop or crash; import the export again")
	}
	return nil
}

// Exchange is a finished exchange to import: a user message and the
// assistant's reply (which may be empty). Either message may say who
// said it and when (messages.Message's Speaker and Time: an imported
// conversation's participant and date); its chunks carry them, for
// retrieval to find a speaker's or a time's turns. Without them, the
// turn's role and time stand for them.
type Exchange struct {
	User  messages.Message
	Reply messages.Message
}

type importReq struct {
	claim
	exchanges []Exchange
	key       *persistence.IdempotencyRow // committed with the last turn, if set
}

// MaxImport is the most exchanges one Import takes.
const MaxImport = 1000

// Import records exchanges on branch as finished turns, in order, with no
// provider step (messages.TurnRecorded): an import of a conversation, or
// an evaluation harness feeding one. They are durable when it returns,
// and are then folded into the summary and indexed for retrieval like
// any other turn. It fails with core.ErrBusy while a turn is in flight.
// It returns the new turns: their ids, seqs and reply nodes.
func (r *Runtime) Import(ctx context.Context, branch messages.BranchID, exchanges []Exchange) ([]messages.PendingTurn, error) {
	return r.ImportWith(ctx, branch, exchanges, ImportOptions{})
}

// ImportOptions are the ways of ImportWith.
type ImportOptions struct {
	// Key, if set, is committed with the last turn imported: the
	// idempotency key of the import this call ends (ClaimKey, scope
	// persistence.ScopeImport), naming its session, branch and count
	// of turns.
	Key *persistence.IdempotencyRow
}

// ImportWith is Import with options.
func (r *Runtime) ImportWith(ctx context.Context, branch messages.BranchID, exchanges []Exchange, o ImportOptions) ([]messages.PendingTurn, error) {
	if len(exchanges) == 0 || len(exchanges) > MaxImport {
		return nil, fmt.Errorf("%w: exchanges: %d, want 1 to %d", persistence.ErrInvalidArgument, len(exchanges), MaxImport)
	}
	for i, x := range exchanges {
		switch {
		case x.User.Role != messages.RoleUser:
			return nil, fmt.Errorf("%w: exchanges[%d].user: role %s, want user", persistence.ErrInvalidArgument, i, x.User.Role)
		case x.Reply.Role != messages.RoleAssistant:
			return nil, fmt.Errorf("%w: exchanges[%d].reply: role %s, want assistant", persistence.ErrInvalidArgument, i, x.Reply.Role)
		}
		for j, m := range [2]messages.Message{x.User, x.Reply} {
			field := [2]string{"user", "reply"}[j]
			if err := messages.CheckSpeaker(m.Speaker); err != nil {
				return nil, fmt.Errorf("%w: exchanges[%d].%s.speaker: %w", persistence.ErrInvalidArgument, i, field, err)
			}
			if err := messages.CheckTime(m.Time); err != nil {
				return nil, fmt.Errorf("%w: exchanges[%d].%s.time: %w", persistence.ErrInvalidArgument, i, field, err)
			}
		}
	}
	if k := o.Key; k != nil {
		if err := checkKey(k.Key); err != nil {
			return nil, err
		}
		switch {
		case k.Scope == persistence.ScopeImport:
		case k.Scope == persistence.ScopeTurn && len(exchanges) == 1 && k.Owner == branch: // Record's
		default:
			return nil, fmt.Errorf("%w: import key scope %q, want %q", persistence.ErrInvalidArgument, byte(k.Scope), byte(persistence.ScopeImport))
		}
	}
	if err := r.db.CheckSpace(); err != nil {
		return nil, err
	}
	res, err := r.ask(ctx, branch, &importReq{exchanges: exchanges, key: o.Key})
	if err != nil {
		return nil, err
	}
	return res.([]messages.PendingTurn), nil
}

// RecordOptions are the ways of Record.
type RecordOptions struct {
	// Key, if not "", is an idempotency key (1 to 255 printable ASCII
	// bytes) among the branch's turns' (those SubmitOptions.Key names):
	// a repeat of the same exchange under the same key returns the turn
	// the first recorded and records nothing; a key first sent with
	// another exchange or message is ErrKeyReused.
	Key string
}

// Record records one exchange that happened elsewhere (a user message
// and the reply an agent's own model gave to it) on branch as a finished
// turn: Import of one exchange, with an idempotency key. It returns the
// turn and whether it was recorded before, under o.Key.
func (r *Runtime) Record(ctx context.Context, branch messages.BranchID, x Exchange, o RecordOptions) (messages.PendingTurn, bool, error) {
	user, err := x.User.MarshalJSON()
	if err != nil {
		return messages.PendingTurn{}, false, fmt.Errorf("user: %w", err)
	}
	reply, err := x.Reply.MarshalJSON()
	if err != nil {
		return messages.PendingTurn{}, false, fmt.Errorf("reply: %w", err)
	}
	for _, p := range []struct {
		field string
		n     int
	}{{"user", len(user)}, {"reply", len(reply)}} {
		if err := r.db.CheckPayload(p.field, p.n); err != nil {
			return messages.PendingTurn{}, false, err
		}
	}
	if o.Key == "" {
		ids, err := r.Import(ctx, branch, []Exchange{x})
		if err != nil {
			return messages.PendingTurn{}, false, err
		}
		return ids[0], false, nil
	}
	hash := keyHash("record", string(user), string(reply))
	row, found, release, err := r.ClaimKey(ctx, persistence.ScopeTurn, branch, o.Key, hash)
	if err != nil {
		return messages.PendingTurn{}, false, fmt.Errorf("record on branch %s: %w", branch, err)
	}
	defer release()
	if found {
		t, err := r.db.TurnRow(ctx, branch, row.Turn)
		if err != nil {
			return messages.PendingTurn{}, false, err
		}
		return messages.PendingTurn{Turn: t.ID, Seq: t.Seq, Reply: t.Reply}, true, nil
	}
	key := &persistence.IdempotencyRow{Scope: persistence.ScopeTurn, Owner: branch, Key: o.Key, Hash: hash, Created: r.cfg.Now().UTC()}
	ids, err := r.ImportWith(ctx, branch, []Exchange{x}, ImportOptions{Key: key})
	if err != nil {
		return messages.PendingTurn{}, false, err
	}
	return ids[0], false, nil
}
