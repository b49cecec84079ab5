package actors

import (
	"context"
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// submit accepts the turn m asks for (TurnAccepted, with the user
// message appended and its idempotency key), after a model m selects,
// and starts it; a repeat of a turn or of a key gets the stream of the
// turn accepted before. A deferred submit (m.within) holds the
// acceptance until the step's write or its deadline (acceptanceDue).
func (l *turnLoop) submit(ctx actor.Context, m *submitReq) (*TurnStream, error) {
	msg, turn, within, model := m.msg, m.turn, m.within, m.model
	if msg.Role != messages.RoleUser {
		return nil, fmt.Errorf("%w: message role is %s, want user", persistence.ErrInvalidArgument, msg.Role)
	}
	if turn.IsZero() {
		return nil, fmt.Errorf("%w: turn id is zero", persistence.ErrInvalidArgument)
	}
	if s, ok, err := l.submitted(turn); err != nil || ok {
		return s, err // the same request again, or an id already used
	}
	if m.key != "" {
		if s, ok, err := l.keyed(m.key, m.hash); err != nil || ok {
			return s, err // a repeat under the same idempotency key
		}
	}
	payload, err := msg.MarshalJSON()
	if err != nil {
		return nil, err
	}
	// Refused here, before anything is accepted: the store would refuse
	// the append, and its commit failing would fail the branch.
	if err := l.rows.CheckPayload("the user message (its text stored twice, as text and rendered text)", len(payload)); err != nil {
		return nil, err
	}
	now := l.now()
	var sel []messages.BranchEvent
	if model != "" {
		if sel, err = l.modelEvents(model); err != nil {
			return nil, err
		}
	}
	if m.memoryTools != nil {
		// Decided on the branch as it is: the model selected above
		// does not change the setting.
		evs, err := l.b.SelectMemoryTools(*m.memoryTools, now)
		if err != nil {
			return nil, err
		}
		sel = append(sel, evs...)
	}
	if model == "" {
		model = l.b.Model
	}
	if err := l.rt.CheckParams(model, m.client.Params); err != nil {
		return nil, err // the turn's model cannot take the client's settings
	}
	// A turn awaiting its client's tool results ends first: its client
	// went on without them.
	l.abandonAwaiting(ctx)
	evs, err := l.b.SubmitFor(turn, m.client, now)
	if err != nil {
		return nil, err
	}
	// The turn is valid (decided on a state the model does not touch):
	// its model is selected first, held, and committed with its
	// acceptance.
	for _, ev := range sel {
		l.persistHeld(ctx, ev, l.txFor(ev))
	}
	ev := evs[0].(messages.TurnAccepted)
	tip := l.b.Tip
	tx := l.txFor(ev)
	tx.Appends = []persistence.TxAppend{{Branch: l.id, ID: turn,
		Req: persistence.AppendRequest{Payload: payload, TypeTag: TypeUserMessage, Codec: CodecJSON, ExpectParent: &tip}}}
	if m.key != "" {
		// The key is committed with the turn's acceptance (TX-0): a
		// repeat finds the turn, and a turn lost finds no key.
		row := persistence.IdempotencyRow{Scope: persistence.ScopeTurn, Owner: l.id, Key: m.key, Hash: m.hash, Turn: turn, Created: now.UTC()}
		tx.Keys = []persistence.IdempotencyRow{row}
		if l.keys == nil {
			l.keys = map[string]persistence.IdempotencyRow{}
		}
		l.keys[m.key] = row
	}
	s := newTurnStream(l.id, turn, ev.Seq)
	l.streams[turn] = s
	l.msgs.put(turn, msg)
	l.deferring = within > 0
	l.persistHeld(ctx, ev, tx) // and its effects: prepare starts the step
	l.deferring = false
	if within > 0 && !l.step.IsZero() {
		// Deferred, and the step runs: its acceptance is committed with
		// what the step leads to, or by the deadline.
		l.unacked = true
		after(ctx, within, &flushUnackedReq{turn: turn})
		return s, nil
	}
	l.flush()
	return s, nil
}

// submitted returns the stream of turn if this branch already accepted it
// as its latest turn: the live one while it streams, else one that
// reports where the turn got to. An id the store holds for any other node
// is refused (committing it would fail the branch). A new id costs one
// store lookup.
func (l *turnLoop) submitted(turn messages.TurnID) (*TurnStream, bool, error) {
	if s := l.streams[turn]; s != nil {
		return s, true, nil
	}
	var seq uint64
	var phase messages.TurnPhase
	var reason string
	var out messages.StepOutcome
	if t, ok := l.b.Turn(turn); ok && t.Seq == l.b.TurnSeq {
		seq, phase, reason, out = t.Seq, t.Phase, t.Reason, t.Outcome
	} else if ok {
		return nil, false, fmt.Errorf("%w: turn id %s is already used", persistence.ErrInvalidArgument, turn)
	} else if _, err := l.rows.Node(context.Background(), turn); errors.Is(err, persistence.ErrNodeNotFound) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, err
	} else if rows, err := l.rows.TurnRows(context.Background(), l.id, l.b.TurnSeq, 1); err == nil && len(rows) == 1 && rows[0].ID == turn {
		seq, phase, reason = rows[0].Seq, rows[0].Phase, rows[0].Reason
		if phase == messages.PhaseFailed {
			out = messages.FailedOutcome(rows[0].Code, reason)
		} else if out.Kind.UnmarshalText([]byte(rows[0].Outcome)) != nil {
			out.Kind = messages.OutcomeCompleted // a row written before outcomes were
		}
	} else {
		return nil, false, fmt.Errorf("%w: turn id %s is already used", persistence.ErrInvalidArgument, turn)
	}
	s := newTurnStream(l.id, turn, seq)
	if phase >= messages.PhaseResponseFinalized {
		s.push(Update{Done: true, Phase: phase, Outcome: out, Err: reason})
	} else {
		l.streams[turn] = s // in flight: it ends with the turn
	}
	return s, true, nil
}

// acceptanceDue commits the deferred acceptance of turn m.turn at its
// deadline, if it is still held: a later turn's acceptance, held when
// it fires, has a deadline of its own.
func (l *turnLoop) acceptanceDue(m *flushUnackedReq) {
	if t, ok := l.b.InFlight(); l.unacked && ok && t.ID == m.turn {
		l.flush()
	}
}
