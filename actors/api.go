package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers"
)

// BranchInfo is what inspection shows of a branch.
type BranchInfo struct {
	Branch    messages.BranchID
	Session   messages.SessionID
	Parent    messages.BranchID
	Tip       messages.NodeID
	State     messages.StateCheckpoint
	Epoch     uint64
	TurnSeq   uint64
	Committed uint64
	Failed    uint64
	Indexed   uint64
	Turns     []core.Turn // not yet done: pending, in flight, awaiting index
	Pending   int
	InFlight  *core.Turn
	Events    uint64
	Model     string // the selected model's name; "" is the default
	// MemoryTools is the branch's memory tools setting for its next
	// turns; MemoryToolsOn whether, under it, they are offered the
	// memory tools (on the branch's model, with the runtime's config).
	MemoryTools   messages.MemoryTools
	MemoryToolsOn bool
}

// PendingTurns are the branch's pending turns (finalized, not yet folded
// into its summary), in order.
func (bi BranchInfo) PendingTurns() []messages.PendingTurn {
	var out []messages.PendingTurn
	for _, t := range bi.Turns {
		if t.Phase == messages.PhaseResponseFinalized {
			out = append(out, messages.PendingTurn{Turn: t.ID, Seq: t.Seq, Reply: t.Reply})
		}
	}
	return out
}

// branchQueries answers what is asked of the branch without changing
// it: its info (inspectReq) and the base of a fork (forkReq).
type branchQueries struct{ c *branchCore }

func (q branchQueries) info() BranchInfo {
	bi := BranchInfo{Branch: q.c.id, Session: q.c.b.Session, Parent: q.c.b.Parent, Tip: q.c.b.Tip, State: q.c.b.State,
		Epoch: q.c.b.Epoch, TurnSeq: q.c.b.TurnSeq, Committed: q.c.b.Committed, Failed: q.c.b.Failed, Indexed: q.c.b.Indexed,
		Turns: slices.Clone(q.c.b.Turns), Pending: len(q.c.b.Pending()), Events: q.c.b.Events, Model: q.c.b.Model,
		MemoryTools: q.c.b.MemoryTools, MemoryToolsOn: q.c.rt.memoryToolsOn(q.c.b.Model, q.c.b.MemoryTools)}
	if t, ok := q.c.b.InFlight(); ok {
		bi.InFlight = &t
	}
	if !q.c.b.Created {
		return BranchInfo{}
	}
	return bi
}

// ErrNotForkable is returned when a fork point is a turn without a final
// response (in flight or failed).
var ErrNotForkable = errors.New("actors: cannot fork there")

// forkPoint computes the base of a fork after turn at (zero: the head):
// the transcript tip, the state to start from, the finalized turns not
// folded into it, which the new branch carries as pending, and the facts
// pinned when turn at was the latest (pinned or edited before turn at+1
// was accepted, and not unpinned by then), whatever the state read
// holds: a pin made after the last fold is in no state row yet, and a
// state row committed after turn at may hold pins made later.
func (q branchQueries) forkPoint(at messages.NodeID) (messages.BranchCreated, error) {
	ev, err := q.forkBase(at)
	if err != nil {
		return ev, err
	}
	ev.Pins = q.c.b.PinsAt(ev.TurnSeq)
	ev.State.Pinned = core.PinFacts(ev.Pins)
	return ev, nil
}

// forkBase is forkPoint but for the pins: the state it finds holds the
// pins of its row, or the head's.
func (q branchQueries) forkBase(at messages.NodeID) (messages.BranchCreated, error) {
	ev := messages.BranchCreated{Session: q.c.b.Session, Parent: q.c.id, ForkAt: at, MemoryTools: q.c.b.MemoryTools}
	if !q.c.b.Created {
		return ev, core.ErrNotCreated
	}
	pendingUpTo := func(last messages.TurnID) []messages.PendingTurn {
		var out []messages.PendingTurn
		for _, t := range q.c.b.Pending() {
			out = append(out, messages.PendingTurn{Turn: t.ID, Seq: t.Seq, Reply: t.Reply})
			if t.ID == last {
				break
			}
		}
		return out
	}
	if at.IsZero() {
		if q.c.b.Tip.IsZero() {
			return ev, fmt.Errorf("%w: branch %s has no turns yet", ErrNotForkable, q.c.id)
		}
		if t, ok := q.c.b.InFlight(); ok {
			return ev, fmt.Errorf("%w: turn %d is %s; fork at a finished turn or wait", ErrNotForkable, t.Seq, t.Phase)
		}
		ev.Tip, ev.State, ev.TurnSeq = q.c.b.Tip, q.c.b.State, q.c.b.TurnSeq
		ev.Pending = pendingUpTo(messages.TurnID{})
		ev.Window = slices.Clone(q.c.b.Window)
		ev.ForkAt = q.c.b.Tip
		return ev, nil
	}
	if t, ok := q.c.b.Turn(at); ok && t.Phase == messages.PhaseResponseFinalized {
		ev.Tip, ev.State, ev.TurnSeq, ev.Pending = t.Reply, q.c.b.State, t.Seq, pendingUpTo(at)
		ev.Window = slices.Clone(q.c.b.Window) // committed before every pending turn
		return ev, nil
	}
	row, err := q.turnRow(at)
	if err != nil {
		return ev, err
	}
	if row.Phase < messages.PhaseStateCommitted || row.Phase == messages.PhaseFailed {
		return ev, fmt.Errorf("%w: turn %d is %s", ErrNotForkable, row.Seq, row.Phase)
	}
	ctx := context.Background()
	st, err := q.c.rows.StateRow(ctx, q.c.id, row.StateSeq)
	if err != nil {
		return ev, err
	}
	ev.Tip, ev.TurnSeq = row.Reply, row.Seq
	i := slices.Index(st.Turns, at)
	if i == len(st.Turns)-1 {
		ev.State = messages.StateCheckpoint{ID: st.ID, Seq: st.Seq, Summary: st.Summary, Pinned: st.Pinned}
		ev.Window = windowAt(ctx, q.c.rows, q.c.id, st.Seq)
		return ev, nil
	}
	// The commit that folded at also folded later turns: start from the
	// state before it and carry the folded turns up to at as pending.
	prev, err := q.c.rows.StateRow(ctx, q.c.id, row.StateSeq-1)
	if err != nil {
		return ev, err
	}
	ev.State = messages.StateCheckpoint{ID: prev.ID, Seq: prev.Seq, Summary: prev.Summary, Pinned: prev.Pinned}
	ev.Window = windowAt(ctx, q.c.rows, q.c.id, prev.Seq)
	for _, id := range st.Turns[:i+1] {
		r, err := q.turnRow(id)
		if err != nil {
			return ev, err
		}
		ev.Pending = append(ev.Pending, messages.PendingTurn{Turn: r.ID, Seq: r.Seq, Reply: r.Reply})
	}
	return ev, nil
}

// windowRows are the rows windowAt reads.
type windowRows interface {
	BranchRow(ctx context.Context, id messages.BranchID) (persistence.BranchRow, error)
	StateRow(ctx context.Context, branch messages.BranchID, seq uint64) (persistence.StateRow, error)
	TurnRow(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (persistence.TurnRow, error)
}

// windowAt returns the verbatim window of a fork of branch whose base is
// its state seq: the transcript nodes (user message, reply) of the last
// turns folded into that state and the states before it, oldest first,
// at most core.WindowMax, as the branch's own Window held them when the
// state was its head. A state or turn a fork inherited is its parent's
// row (state seqs go on from the fork's base, and the fork's own row of
// its base state lists no turns), so those are read from the ancestors.
// It stops at the first row it cannot read, with the window found so
// far: the turns left out are in the summary and retrieval, as ones
// older than the window are.
func windowAt(ctx context.Context, rows windowRows, branch messages.BranchID, seq uint64) []messages.NodeID {
	lineage := []messages.BranchID{branch} // branch, then its ancestors as they are needed
	// find calls read with the branches of the lineage, nearest first,
	// until it returns other than ErrNotFound.
	find := func(read func(messages.BranchID) error) error {
		for i := 0; ; i++ {
			if i == len(lineage) {
				b, err := rows.BranchRow(ctx, lineage[i-1])
				if err != nil {
					return err
				}
				if b.Parent.IsZero() {
					return persistence.ErrNotFound
				}
				lineage = append(lineage, b.Parent)
			}
			if err := read(lineage[i]); !errors.Is(err, persistence.ErrNotFound) {
				return err
			}
		}
	}
	// state reads the state at seq, from the row of the nearest branch
	// that lists its turns (a state that folded none, a shrunk summary,
	// is the nearest row).
	state := func(seq uint64) (st persistence.StateRow, ok bool) {
		_ = find(func(b messages.BranchID) error { // ok says whether it found one
			r, err := rows.StateRow(ctx, b, seq)
			if err != nil || (ok && r.ID != st.ID) {
				return err // nil for another state: keep the one found
			}
			st, ok = r, true
			if len(r.Turns) == 0 {
				return persistence.ErrNotFound // a fork's row of its base: look further up
			}
			return nil
		})
		return st, ok
	}
	var newest []messages.NodeID // reply, turn, reply, turn, … from the newest
	for ; len(newest) < core.WindowMax; seq-- {
		st, ok := state(seq)
		if !ok {
			break
		}
		for j := len(st.Turns) - 1; j >= 0 && len(newest) < core.WindowMax; j-- {
			var r persistence.TurnRow
			err := find(func(b messages.BranchID) (err error) {
				r, err = rows.TurnRow(ctx, b, st.Turns[j])
				return err
			})
			if err != nil || r.Reply.IsZero() {
				return reversed(newest)
			}
			newest = append(newest, r.Reply, r.ID)
		}
		if seq == 0 {
			break
		}
	}
	return reversed(newest)
}

// reversed returns s reversed, nil when empty.
func reversed(s []messages.NodeID) []messages.NodeID {
	if len(s) == 0 {
		return nil
	}
	slices.Reverse(s)
	return s
}

// turnRow finds the lifecycle row of turn id on this branch.
func (q branchQueries) turnRow(id messages.TurnID) (persistence.TurnRow, error) {
	return q.c.rows.TurnRow(context.Background(), q.c.id, id)
}

// CreateSession starts a new conversation with one empty branch, the
// default tenant's.
func (r *Runtime) CreateSession(ctx context.Context, title string) (persistence.SessionRow, persistence.BranchRow, error) {
	return r.CreateSessionFor(ctx, "", title)
}

// CreateSessionFor is CreateSession for tenant, which owns the session
// for good ("" is persistence.DefaultTenant).
func (r *Runtime) CreateSessionFor(ctx context.Context, tenant, title string) (persistence.SessionRow, persistence.BranchRow, error) {
	return r.CreateSessionWith(ctx, tenant, title, nil)
}

// CreateSessionWith is CreateSessionFor with the session's metadata
// (persistence.SessionRow.Metadata; nil for none).
func (r *Runtime) CreateSessionWith(ctx context.Context, tenant, title string, metadata map[string]string) (persistence.SessionRow, persistence.BranchRow, error) {
	if err := r.db.CheckSpace(); err != nil {
		return persistence.SessionRow{}, persistence.BranchRow{}, fmt.Errorf("create session: %w", err)
	}
	now := r.cfg.Now()
	if tenant == persistence.DefaultTenant {
		tenant = "" // stored as the rows made before tenants are, whatever made it
	}
	sid, err := r.ownedSessionID(func() messages.SessionID { return messages.NewID[messages.SessionID](now) })
	if err != nil {
		return persistence.SessionRow{}, persistence.BranchRow{}, fmt.Errorf("create session: %w", err)
	}
	s := persistence.SessionRow{ID: sid, Title: title, Created: now.UTC(), Tenant: tenant, Metadata: metadata}
	b := persistence.BranchRow{ID: messages.NewID[messages.BranchID](now), Session: s.ID, Label: "main", Created: now.UTC()}
	s.ActiveBranch = b.ID
	ev := messages.BranchCreated{Session: s.ID, Branch: b.ID, At: now.UTC(),
		State: messages.StateCheckpoint{ID: messages.NewID[messages.StateID](now)}}
	if _, err := r.ask(ctx, b.ID, &createReq{ev: ev, session: &s, row: b}); err != nil {
		return s, b, fmt.Errorf("create session: %w", err)
	}
	return s, b, nil
}

// Fork creates a branch of parent that continues after turn at (zero:
// after the head). No history is copied; the new branch starts from the
// state at that turn, with any finalized turns not yet folded into it
// carried as pending.
func (r *Runtime) Fork(ctx context.Context, parent messages.BranchID, at messages.NodeID, label string) (persistence.BranchRow, error) {
	return r.ForkWith(ctx, parent, at, label, ForkOptions{})
}

// ForkOptions are the ways of ForkWith.
type ForkOptions struct {
	// Key, if not "", is an idempotency key (1 to 255 printable ASCII
	// bytes): a fork of the same parent under the same key, at the same
	// turn with the same label, returns the branch the first made and
	// creates none (a repeat with another turn or label is
	// ErrKeyReused). The key is committed with the new branch.
	Key string
}

// ForkWith is Fork with options.
func (r *Runtime) ForkWith(ctx context.Context, parent messages.BranchID, at messages.NodeID, label string, o ForkOptions) (persistence.BranchRow, error) {
	var key *persistence.IdempotencyRow
	if o.Key != "" {
		hash := keyHash("fork", at.String(), label)
		row, found, release, err := r.ClaimKey(ctx, persistence.ScopeFork, parent, o.Key, hash)
		if err != nil {
			return persistence.BranchRow{}, fmt.Errorf("fork branch %s: %w", parent, err)
		}
		defer release()
		if found {
			return r.db.BranchRow(ctx, row.Branch)
		}
		key = &persistence.IdempotencyRow{Scope: persistence.ScopeFork, Owner: parent, Key: o.Key, Hash: hash}
	}
	if err := r.db.CheckSpace(); err != nil {
		return persistence.BranchRow{}, fmt.Errorf("fork branch %s: %w", parent, err)
	}
	res, err := r.ask(ctx, parent, &forkReq{at: at})
	if te := (*TimeoutError)(nil); errors.As(err, &te) {
		te.Accepted = AcceptedNo // the fork point is only read: nothing is stored before the new branch
	}
	if err != nil {
		return persistence.BranchRow{}, fmt.Errorf("fork branch %s: %w", parent, err)
	}
	ev := res.(messages.BranchCreated)
	now := r.cfg.Now()
	ev.Branch = messages.NewID[messages.BranchID](now)
	ev.At = now.UTC()
	row := persistence.BranchRow{ID: ev.Branch, Session: ev.Session, Parent: parent, ForkAt: ev.ForkAt, ForkSeq: ev.TurnSeq,
		Label: label, Created: now.UTC()}
	if key != nil {
		key.Branch, key.Created = ev.Branch, now.UTC()
	}
	if _, err := r.ask(ctx, ev.Branch, &createReq{ev: ev, row: row, key: key}); err != nil {
		return row, fmt.Errorf("fork branch %s: %w", parent, err)
	}
	return row, nil
}

// Submit sends a user message to a branch and returns the stream of its
// turn. It fails with core.ErrBusy while the previous turn has no final
// response yet (SRD §6.2).
//
// The turn is accepted durably (its TX-0 is committed) before Submit
// returns.
func (r *Runtime) Submit(ctx context.Context, branch messages.BranchID, text string) (*TurnStream, error) {
	return r.SubmitDeferred(ctx, branch, text, 0)
}

// SubmitDeferred is Submit for a caller that tells its client nothing
// about the turn before the turn's last update (Done), as an
// OpenAI-compatible endpoint does: those APIs have no acceptance to
// acknowledge, only a response. It returns the stream without waiting
// for the turn's acceptance to be durable. That commit is held: it goes
// with the next one the turn leads to (its finalization, TX-A: one
// synced write instead of two) if that comes within within, else at
// within, or before the branch answers any other request. A crash
// before it loses the turn as if it had never been sent, and the
// stream ends failed. The last update still comes after the turn's
// finalization is durable. within <= 0 is Submit.
func (r *Runtime) SubmitDeferred(ctx context.Context, branch messages.BranchID, text string, within time.Duration) (*TurnStream, error) {
	return r.SubmitWith(ctx, branch, text, SubmitOptions{Within: within})
}

// SubmitOptions are the ways of SubmitWith.
type SubmitOptions struct {
	// Within, if positive, defers the commit of the turn's acceptance
	// (SubmitDeferred).
	Within time.Duration
	// Model, if not "", is selected on the branch first, as SelectModel
	// does, in the same request to the branch: the turn and the ones
	// after it use it. Its change is committed with the turn's
	// acceptance, and a turn the branch refuses (another one is in
	// flight) leaves the branch's model as it was.
	Model string
	// MemoryTools, if not nil, is selected on the branch first, as
	// SelectMemoryTools does, in the same request to the branch and
	// committed with the turn's acceptance: the turn and the ones after
	// it are offered the memory tools as it says. A turn the branch
	// refuses leaves the branch's setting as it was.
	MemoryTools *messages.MemoryTools
	// Key, if not "", is an idempotency key (1 to 255 printable ASCII
	// bytes), committed with the turn's acceptance: a turn sent again
	// under the same key, with the same text and model, is not stored
	// again but answered with the first one's stream (a follower while
	// it runs), or how it ended (its reply read from the store). The
	// same key with another text or model is ErrKeyReused. Keys are kept
	// for good, one per turn of the branch.
	Key string
	// Client, if not nil, is what an API client (the proxy) sent with the
	// turn: recorded with the turn's acceptance and used by each of its
	// provider steps.
	Client *ClientTurn
}

// ClientTurn is what a client of a model API sends with a turn beside its
// message (SRD §11, the proxy): its system prompt, its own tools and its
// message's content blocks.
type ClientTurn struct {
	// System is the client's system prompt: the turn's system
	// instructions, before the runtime's pinned facts, summary and
	// retrieved memory. It is kept with the turn: every step of the
	// turn's tool loop uses it.
	System string
	// Tools are the client's tools, offered to the model beside the
	// runtime's own. The runtime does not run them: a step that calls
	// one ends the request with the calls (Update.Awaiting), the turn
	// stays in flight, and SubmitToolResults answers the calls and goes
	// on with the turn's tool loop.
	Tools []messages.Tool
	// ToolChoice is passed to the provider with the tools.
	ToolChoice messages.ToolChoice
	// Content, if not empty, is the user message's blocks (text, images,
	// other parts kept as sent), in place of the text.
	Content messages.Blocks
	// Params are the client's generation settings, kept with the turn
	// for each of its steps: the output bound replaces the model's
	// max_output_tokens (and the context's response reserve, up to half
	// the model's window), and the rest goes to the provider (providers.Request.Params). A setting the
	// turn's model cannot take refuses the turn (*providers.ParamsError,
	// persistence.ErrInvalidArgument): see CheckParams.
	Params messages.GenParams
}

// ErrNoToolCallsOpen is returned by SubmitToolResults when no turn of the
// branch awaits the results of client tool calls.
var ErrNoToolCallsOpen = errors.New("actors: no client tool call awaits a result")

// SubmitToolResults answers the open client tool calls of the turn that
// awaits them on branch (Update.Awaiting) with outputs, one
// messages.ToolOutput per open call, and goes on with that turn's tool
// loop: its next provider step runs. It returns the turn's stream from
// there on. A branch with no such turn is ErrNoToolCallsOpen; an output
// that answers no open call, or an open call left unanswered, is
// persistence.ErrInvalidArgument naming the call id. o.Key, if set, is an
// idempotency key as for SubmitWith; o's other fields are ignored.
//
// While the turn's step (or the runtime's tools) still runs, it is a
// *core.BusyError: the turn may await its client later. Outputs are
// recorded in the order of the calls. A repeat under o.Key with the same
// outputs (in any order) records nothing and gets the stream those
// outputs started, while this branch actor keeps it, else how the turn
// stands: awaiting (its open calls), running (a follower) or its end.
func (r *Runtime) SubmitToolResults(ctx context.Context, branch messages.BranchID, outputs messages.Items, o SubmitOptions) (*TurnStream, error) {
	return r.submitToolResults(ctx, branch, outputs, o)
}

// SubmitWith is Submit with options.
//
// A turn that a client sent with o.Client (the proxy) is checked first
// (persistence.ErrInvalidArgument naming the client's field at fault:
// client.tools[i].name, …); its message is o.Client.Content when not
// empty. A turn submitted while the branch's turn in flight awaits its
// client's tool results (Update.Awaiting) ends that turn first: its open
// calls are answered with an error and its response finalized as
// incomplete (ReasonToolResultsMissing); the new turn is not refused as
// busy.
func (r *Runtime) SubmitWith(ctx context.Context, branch messages.BranchID, text string, o SubmitOptions) (*TurnStream, error) {
	client, isClient := clientOf(o.Client)
	if isClient {
		if err := r.checkClient(o.Client); err != nil {
			return nil, err
		}
	}
	msg := messages.NewMessage(messages.RoleUser, messages.Text{Text: text})
	if isClient && len(o.Client.Content) > 0 {
		msg = messages.NewMessage(messages.RoleUser, slices.Clone(o.Client.Content)...)
	} else if text == "" {
		return nil, fmt.Errorf("%w: message text is empty", persistence.ErrInvalidArgument)
	}
	var hash string
	if o.Key != "" {
		if err := checkKey(o.Key); err != nil {
			return nil, err
		}
		parts := []string{"turn", text, o.Model}
		if isClient {
			parts = append(parts, clientHash(o.Client))
		}
		if o.MemoryTools != nil { // only when set: a key's hash without it is as it was
			parts = append(parts, "memory_tools="+string(*o.MemoryTools))
		}
		hash = keyHash(parts...)
	}
	if err := r.db.CheckSpace(); err != nil { // new work waits for free space
		// A repeat of a turn already accepted is not new work: it gets
		// the turn (the branch answers it from its key).
		if _, kerr := r.db.IdempotencyKey(ctx, persistence.ScopeTurn, branch, o.Key); o.Key == "" || kerr != nil {
			return nil, err
		}
	}
	// The turn id is chosen here, so that sending the request again (after
	// the branch actor stopped with it unread) cannot make a second turn.
	if o.MemoryTools != nil && !o.MemoryTools.Valid() {
		return nil, fmt.Errorf("%w: memory_tools: %s, want default, on or off", persistence.ErrInvalidArgument, *o.MemoryTools)
	}
	req := &submitReq{msg: msg, turn: messages.NewID[messages.TurnID](r.cfg.Now()), within: o.Within, model: o.Model,
		memoryTools: o.MemoryTools, key: o.Key, hash: hash, client: client}
	res, err := r.ask(ctx, branch, req)
	var te *TimeoutError
	if errors.As(err, &te) {
		return nil, r.turnTimedOut(branch, req, te)
	}
	if err != nil {
		return nil, err
	}
	return res.(*TurnStream), nil
}

// turnTimedOut completes the TimeoutError of submit request req: a turn
// whose request was taken (AcceptedUnknown) may have been accepted since,
// which its row, or its idempotency key's, tells.
func (r *Runtime) turnTimedOut(branch messages.BranchID, req *submitReq, te *TimeoutError) error {
	if te.Accepted != AcceptedUnknown {
		return te // not taken: no turn
	}
	ctx := context.Background()
	if req.key != "" {
		if row, err := r.db.IdempotencyKey(ctx, persistence.ScopeTurn, branch, req.key); err == nil {
			te.Accepted, te.Turn = AcceptedYes, row.Turn
		}
		return te
	}
	te.Turn = req.turn
	if _, err := r.db.TurnRow(ctx, branch, req.turn); err == nil {
		te.Accepted = AcceptedYes
	}
	return te
}

// Cancel cancels the turn in flight on branch: its provider step stops
// (or its running tools are told to stop) and the turn fails, or, inside
// a tool loop, is finalized as incomplete with what the loop did. It
// fails with ErrNoTurnInFlight when there is nothing to cancel.
func (r *Runtime) Cancel(ctx context.Context, branch messages.BranchID) error {
	_, err := r.ask(ctx, branch, &cancelReq{})
	return err
}

// SelectModel makes branch's next turns use the model configured under
// name ("" for the default model). History is not rewritten: it is stored
// provider-neutral, so a branch can switch between providers mid
// conversation. A name not configured is an error naming the known ones.
func (r *Runtime) SelectModel(ctx context.Context, branch messages.BranchID, name string) error {
	_, err := r.ask(ctx, branch, &modelReq{name: name})
	return err
}

// SelectMemoryTools sets whether branch's next turns are offered the
// memory tools (search_memory, pin_fact, unpin_fact): on, off, or as
// the runtime's config says for the branch's model (MemoryToolsDefault).
// A turn in flight keeps the setting it was accepted with; a fork
// starts with its parent's. A value that is not a setting is
// persistence.ErrInvalidArgument naming memory_tools.
func (r *Runtime) SelectMemoryTools(ctx context.Context, branch messages.BranchID, m messages.MemoryTools) error {
	if !m.Valid() {
		return fmt.Errorf("%w: memory_tools: %s, want default, on or off", persistence.ErrInvalidArgument, m)
	}
	_, err := r.ask(ctx, branch, &memoryToolsReq{setting: m})
	return err
}

// ModelNames returns the names of the models a branch can select, sorted.
func (r *Runtime) ModelNames() []string {
	names := make([]string, 0, len(r.cfg.Models))
	for n := range r.cfg.Models {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// CountTokens is the runtime's estimate of the tokens text takes with
// the model configured under name (the default model for "" or a name
// not configured): the count the assembler budgets a context with.
func (r *Runtime) CountTokens(name, text string) int { return r.counter(r.model(name))(text) }

// SystemInstructions are the instructions that open every context the
// runtime assembles (Config.SystemInstructions).
func (r *Runtime) SystemInstructions() string { return r.cfg.SystemInstructions }

// DefaultModel names the provider and the model id of a branch that
// selected no model.
func (r *Runtime) DefaultModel() (provider, modelID string) {
	return r.cfg.Provider.Name(), r.cfg.Model
}

// CheckParams reports whether the model configured under name (the
// default model for "" or a name not configured) can take p: nil, or a
// *providers.ParamsError naming each field it cannot take, which
// errors.Is persistence.ErrInvalidArgument. SubmitWith checks a client's
// params against the model the turn runs on; an API front end calls it
// first, to refuse a request before it creates anything.
func (r *Runtime) CheckParams(name string, p messages.GenParams) error {
	if p.IsZero() {
		return nil
	}
	m := r.model(name)
	if refused := providers.RefusedParams(m.Provider, m.ID, p); len(refused) > 0 {
		return paramsError{&providers.ParamsError{Provider: m.Provider.Name(), Model: m.ID, Refused: refused}}
	}
	return nil
}

// paramsError is a *providers.ParamsError that is an invalid argument.
type paramsError struct{ *providers.ParamsError }

func (e paramsError) Unwrap() []error {
	return []error{e.ParamsError, persistence.ErrInvalidArgument}
}

// ModelInfo returns the provider's name and the model id of the model
// configured under name, and whether there is one.
func (r *Runtime) ModelInfo(name string) (provider, modelID string, ok bool) {
	m, ok := r.cfg.Models[name]
	if !ok {
		return "", "", false
	}
	return m.Provider.Name(), m.ID, true
}

// Steps returns the provider steps of a turn, in order: raw request and
// response, normalized items, outcome and stream counters.
func (r *Runtime) Steps(ctx context.Context, turn messages.TurnID) ([]persistence.StepRow, error) {
	return r.db.Steps(ctx, turn)
}

// Chunks returns the retrieval chunks turn was indexed into, in reading
// order: by message (the user's, then the reply), the text's chunks by
// offset, then the tool results'. A turn not indexed yet has none.
func (r *Runtime) Chunks(ctx context.Context, turn messages.TurnID) ([]persistence.ChunkRow, error) {
	rows, err := r.db.Chunks(ctx, turn)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(rows, func(a, b persistence.ChunkRow) int {
		// The user's message (the turn's own node) first; tool results last.
		return cmp.Or(falseFirst(a.Node != turn, b.Node != turn), a.Node.Compare(b.Node),
			falseFirst(a.Type == messages.ChunkToolResult, b.Type == messages.ChunkToolResult), cmp.Compare(a.Start, b.Start))
	})
	return rows, nil
}

// falseFirst orders false before true.
func falseFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// CommitPending asks the branch to fold its pending turns into a new
// state now ("commit pending now", SRD §17.2).
func (r *Runtime) CommitPending(ctx context.Context, branch messages.BranchID) error {
	_, err := r.ask(ctx, branch, &commitReq{})
	return err
}

// Inspect returns the branch's live state.
func (r *Runtime) Inspect(ctx context.Context, branch messages.BranchID) (BranchInfo, error) {
	res, err := r.ask(ctx, branch, &inspectReq{})
	if err != nil {
		return BranchInfo{}, err
	}
	bi := res.(BranchInfo)
	if bi.Branch.IsZero() {
		return bi, fmt.Errorf("%w: branch %s", persistence.ErrBranchNotFound, branch)
	}
	return bi, nil
}

// kill makes a branch actor panic (Config.Faults): supervision restarts
// it and it rebuilds its state by replay.
func (r *Runtime) kill(ctx context.Context, branch messages.BranchID) error {
	if err := r.placed(ctx, branch, messages.SessionID{}); err != nil {
		return err
	}
	pid, err := r.pid(ctx, branch)
	if err != nil {
		return err
	}
	r.sys.Root.Send(pid, &killReq{})
	return nil
}

// Stop stops a branch's actor now, as passivation would, freeing what
// it holds in memory: its next message activates it again, by replay. A
// turn it is running is cut off, and ends interrupted, as in a crash.
func (r *Runtime) Stop(ctx context.Context, branch messages.BranchID) error {
	if err := r.placed(ctx, branch, messages.SessionID{}); err != nil {
		return err
	}
	pid, err := r.pid(ctx, branch)
	if err != nil {
		return err
	}
	r.sys.Root.Send(r.root, &passivateReq{id: branch, pid: pid})
	return nil
}

// Entry is one message of a branch's history.
type Entry struct {
	Node    messages.NodeID
	Depth   uint64
	Message messages.Message
	// PartialReply, on a user message whose turn a crash interrupted,
	// is the reply's output recovered from the stream journal:
	// incomplete, and not in the transcript (History sets it).
	PartialReply *Recovered
}

// History returns up to n messages of a branch's transcript ending just
// before node before (zero: at the head), oldest first, and the cursor for
// the page before it (zero at the start). A user message whose turn a
// crash interrupted carries the output recovered for its reply
// (Entry.PartialReply).
func (r *Runtime) History(ctx context.Context, branch messages.BranchID, before messages.NodeID, n int) ([]Entry, messages.NodeID, error) {
	var page persistence.Page
	var err error
	if before.IsZero() {
		page, err = r.db.Last(ctx, branch, n)
	} else if err = r.onBranch(ctx, branch, before); err == nil {
		page, err = r.db.Before(ctx, before, n)
	}
	if err != nil {
		return nil, messages.TurnID{}, err
	}
	out := make([]Entry, 0, len(page.Nodes))
	for _, t := range page.Nodes {
		m, err := readMessage(r.db, t.ID)
		if err != nil {
			return nil, messages.TurnID{}, err
		}
		out = append(out, Entry{Node: t.ID, Depth: t.Depth, Message: m})
	}
	if err := r.withRecovered(ctx, out); err != nil {
		return nil, messages.TurnID{}, err
	}
	return out, page.Next, nil
}

// TurnAt returns the row of branch's turn number seq (1, 2, …); one the
// branch does not have is ErrNodeNotFound.
func (r *Runtime) TurnAt(ctx context.Context, branch messages.BranchID, seq uint64) (persistence.TurnRow, error) {
	rows, err := r.db.TurnRows(ctx, branch, seq, 1)
	if err != nil {
		return persistence.TurnRow{}, err
	}
	if len(rows) == 0 || rows[0].Seq != seq {
		return persistence.TurnRow{}, fmt.Errorf("%w: branch %s has no turn %d", persistence.ErrNodeNotFound, branch, seq)
	}
	return rows[0], nil
}

// TurnRow returns the lifecycle row of a turn on branch's transcript:
// the branch's own row, or, for a turn before its fork point that it did
// not carry as pending, the row of the ancestor that made it. A turn not
// on the transcript is ErrNodeNotFound.
func (r *Runtime) TurnRow(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (persistence.TurnRow, error) {
	row, err := r.db.TurnRow(ctx, branch, turn)
	if !errors.Is(err, persistence.ErrNodeNotFound) {
		return row, err
	}
	if err := r.onBranch(ctx, branch, turn); err != nil {
		return row, err
	}
	for b := branch; ; {
		br, err := r.db.BranchRow(ctx, b)
		if err != nil {
			return row, err
		}
		if br.Parent.IsZero() {
			return row, fmt.Errorf("%w: %s on branch %s", persistence.ErrNodeNotFound, turn, branch)
		}
		b = br.Parent
		if row, err = r.db.TurnRow(ctx, b, turn); !errors.Is(err, persistence.ErrNodeNotFound) {
			return row, err
		}
	}
}

// onBranch returns persistence.ErrNodeNotFound unless transcript node
// is on branch's transcript: its own, or its ancestors' up to the fork
// point.
func (r *Runtime) onBranch(ctx context.Context, branch messages.BranchID, node messages.NodeID) error {
	t, err := r.db.Node(ctx, node)
	if err == nil {
		var page persistence.RangePage
		if page, err = r.db.Range(ctx, branch, t.Depth, 1); err == nil && (len(page.Nodes) != 1 || page.Nodes[0].ID != node) {
			err = persistence.ErrNodeNotFound
		}
	}
	if errors.Is(err, persistence.ErrNotFound) {
		return fmt.Errorf("%w: %s is not on branch %s or its ancestors", persistence.ErrNodeNotFound, node, branch)
	}
	return err
}

// EachMessage calls fn with each message of a branch's transcript as it
// stood when the call began, oldest first, reading page messages at a
// time (at least 1): memory stays that of one page however long the
// transcript. It stops at fn's first error, which it returns.
func (r *Runtime) EachMessage(ctx context.Context, branch messages.BranchID, page int, fn func(Entry) error) error {
	page = max(page, 1)
	first, err := r.db.Range(ctx, branch, 0, page)
	if err != nil || first.Empty {
		return err
	}
	end := first.HeadDepth + 1 // the depths [0, end) were the branch when the call began
	for start := uint64(0); start < end; start += uint64(page) {
		p := first
		if start > 0 {
			if p, err = r.db.Range(ctx, branch, start, int(min(uint64(page), end-start))); err != nil {
				return err
			}
		}
		for _, t := range p.Nodes {
			if t.Depth >= end {
				return nil
			}
			m, err := readMessage(r.db, t.ID)
			if err != nil {
				return err
			}
			if err := fn(Entry{Node: t.ID, Depth: t.Depth, Message: m}); err != nil {
				return err
			}
		}
	}
	return nil
}

// PartialOutput returns the text a step's stream journal recorded: what
// was shown of a step that failed or was interrupted (the output a crash
// cut off is Runtime.RecoveredOutput). A torn final line (a crash
// mid-write) is dropped and logged.
func (r *Runtime) PartialOutput(step messages.StepID) (text string, torn bool, err error) {
	entries, torn, err := persistence.ReadJournalIn(context.Background(), r.journals, step, r.db.Cipher())
	if torn {
		r.log.Warn().Str("step", step.String()).Msg("stream journal: dropped a torn final line")
	}
	return persistence.JournalText(entries), torn, err
}
