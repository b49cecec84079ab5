package actors

import (
	"context"
	"errors"
	"fmt"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// ContextDebug is an assembled context with its arithmetic: what a model
// saw (or would see) and why.
//
// Context holds, beside the assembled sections, the tools the step
// offered, the tool mode and the tool choice, as recorded when it ran
// (for the next turn: the runtime's tools); they are not part of the
// hashes, which cover the assembled context.
type ContextDebug struct {
	Turn     messages.TurnID           `json:"turn,omitempty"` // zero: the next turn
	Step     messages.StepID           `json:"step,omitempty"`
	Provider string                    `json:"provider,omitempty"`
	Model    string                    `json:"model,omitempty"`
	Context  messages.AssembledContext `json:"context"`
	Report   core.AssemblyReport       `json:"report"`
	// SentHash is the hash recorded when the step ran, RebuiltHash the
	// rebuild's; Matches says they agree (the rebuild is what was sent).
	SentHash    string `json:"sent_hash,omitempty"`
	RebuiltHash string `json:"rebuilt_hash"`
	Matches     bool   `json:"matches"`
	// Retrieved are the chunks retrieval offered, with their scores (the
	// report's Chunks says which were packed); RetrievalError why it
	// failed, if it did.
	Retrieved      []persistence.RetrievedRef `json:"retrieved,omitempty"`
	RetrievalError string                     `json:"retrieval_error,omitempty"`
	// ClientSystem is an API client's system prompt, which starts
	// Context.SystemInstructions (the runtime's instructions follow);
	// Params its generation settings. Empty for other turns.
	ClientSystem string             `json:"client_system,omitempty"`
	Params       messages.GenParams `json:"params,omitzero"`
}

// ErrNoRecipe is returned by DebugContext for a turn whose first step
// recorded no context recipe (it failed before its step ran, or predates
// recipes).
var ErrNoRecipe = errors.New("actors: no context recorded for this turn")

type debugReq struct{ text string }

// DebugNextContext assembles the context branch's next turn would get if
// the user sent text, without storing anything.
func (r *Runtime) DebugNextContext(ctx context.Context, branch messages.BranchID, text string) (ContextDebug, error) {
	res, err := r.ask(ctx, branch, &debugReq{text: text})
	if err != nil {
		return ContextDebug{}, err
	}
	return res.(ContextDebug), nil
}

func (a *branchActor) debugNext(text string) (ContextDebug, error) {
	user := messages.NewMessage(messages.RoleUser, messages.Text{Text: text})
	ac, rep, recipe, err := a.assembleFor(messages.TurnID{}, user, nil)
	if err != nil {
		return ContextDebug{}, err
	}
	m := a.rt.model(a.b.Model)
	hash := contextHash(ac)
	ac.Tools, ac.ToolMode, ac.ToolChoice = a.rt.offeredTools(core.Turn{MemoryTools: a.b.MemoryTools}, a.b.Model)
	return ContextDebug{Provider: m.Provider.Name(), Model: m.ID, Context: ac, Report: rep, RebuiltHash: hash, Matches: true,
		Retrieved: recipe.Retrieved, RetrievalError: recipe.RetrievalError}, nil
}

// DebugContext rebuilds the context of turn's first provider step from
// the store: the transcript messages, the state row of its summary and
// the recipe the step recorded, through the same assembler; it reports
// whether the rebuild is exactly what was sent.
func (r *Runtime) DebugContext(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (ContextDebug, error) {
	if err := r.onBranch(ctx, branch, turn); err != nil {
		return ContextDebug{}, err
	}
	steps, err := r.db.Steps(ctx, turn)
	if err != nil {
		return ContextDebug{}, err
	}
	if len(steps) == 0 || steps[0].Context == nil {
		return ContextDebug{}, fmt.Errorf("%w: turn %s", ErrNoRecipe, turn)
	}
	st := steps[0]
	rc := st.Context
	summary, err := r.stateSummary(ctx, branch, rc.State)
	if err != nil {
		return ContextDebug{}, err
	}
	in := core.AssembleInput{System: joinSystem(rc.System, r.cfg.SystemInstructions), Pinned: rc.Pinned, Summary: summary}
	for _, n := range rc.Window {
		m, err := readMessage(r.db, n)
		if err != nil {
			return ContextDebug{}, fmt.Errorf("window message %s: %w", n, err)
		}
		in.Window = append(in.Window, m)
	}
	for _, p := range rc.Pending {
		reply, err := r.replyOf(ctx, p)
		if err != nil {
			return ContextDebug{}, fmt.Errorf("pending turn %s: %w", p, err)
		}
		pm := core.PendingMessages{Turn: p}
		for _, n := range []messages.NodeID{p, reply} {
			m, err := readMessage(r.db, n)
			if err != nil {
				return ContextDebug{}, fmt.Errorf("pending turn %s: %w", p, err)
			}
			pm.Messages = append(pm.Messages, m)
		}
		in.Pending = append(in.Pending, pm)
	}
	if in.User, err = readMessage(r.db, rc.User); err != nil {
		return ContextDebug{}, fmt.Errorf("user message %s: %w", rc.User, err)
	}
	for _, ref := range rc.Retrieved {
		c, err := r.db.ChunkByID(ctx, ref.Chunk)
		if err != nil {
			return ContextDebug{}, fmt.Errorf("retrieved chunk %s: %w", ref.Chunk, err)
		}
		cand := core.Candidate{Summary: c.Summary,
			Chunk: messages.RetrievedChunk{Chunk: c.ID, SourceTurn: c.SourceTurn, Text: c.Text, Score: ref.Score}}
		if len(ref.Excerpt) > 0 {
			rows := make([]persistence.ChunkRow, len(ref.Excerpt))
			for i, id := range ref.Excerpt {
				if rows[i], err = r.db.ChunkByID(ctx, id); err != nil {
					return ContextDebug{}, fmt.Errorf("retrieved chunk %s: %w", id, err)
				}
			}
			cand.Summary, cand.Chunk.Text = "", excerptText(rows)
		}
		in.Retrieved = append(in.Retrieved, cand)
	}
	budget := core.Budget{ContextLimit: rc.ContextLimit, ResponseReserve: rc.ResponseReserve, SafetyMargin: rc.SafetyMargin,
		RetrievalMax: rc.RetrievalMax, ChunkMax: rc.ChunkMax}
	ac, rep := assembleShrinking(in, budget, r.counterFor(st.Provider, st.Model))
	hash := contextHash(ac)
	ac.Tools, ac.ToolMode, ac.ToolChoice = rc.Tools, rc.ToolMode, rc.ToolChoice
	d := ContextDebug{Turn: turn, Step: st.ID, Provider: st.Provider, Model: st.Model, Context: ac, Report: rep,
		SentHash: rc.Hash, RebuiltHash: hash, Retrieved: rc.Retrieved, RetrievalError: rc.RetrievalError,
		ClientSystem: rc.System, Params: rc.Params}
	d.Matches = d.SentHash == d.RebuiltHash
	return d, nil
}

// stateSummary finds the summary of state id among the state rows of
// branch and its ancestors (a fork starts from its parent's state); the
// initial state of a branch has none.
func (r *Runtime) stateSummary(ctx context.Context, branch messages.BranchID, id messages.StateID) (string, error) {
	for b := branch; !b.IsZero(); {
		for from := uint64(0); ; {
			states, err := r.db.StateRows(ctx, b, from, persistence.MaxPageNodes)
			if err != nil {
				return "", err
			}
			for _, s := range states {
				if s.ID == id {
					return s.Summary, nil
				}
			}
			if len(states) < persistence.MaxPageNodes {
				break
			}
			from = states[len(states)-1].Seq + 1
		}
		row, err := r.db.BranchRow(ctx, b)
		if err != nil {
			return "", err
		}
		b = row.Parent
	}
	return "", nil
}

// replyOf finds the reply of a finalized turn: the assistant message its
// user message's transcript node leads to (a turn finalized is never
// continued from its user message, only from its reply).
func (r *Runtime) replyOf(ctx context.Context, turn messages.TurnID) (messages.NodeID, error) {
	children, err := r.db.Children(ctx, turn)
	if err != nil {
		return messages.TurnID{}, err
	}
	for _, c := range children {
		t, err := r.db.Node(ctx, c)
		if err != nil {
			return messages.TurnID{}, err
		}
		if t.TypeTag == TypeAssistantMessage {
			return c, nil
		}
	}
	return messages.NodeID{}, errors.New("no reply in the transcript")
}
