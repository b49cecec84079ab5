package actors

import (
	"context"
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
)

// pinOp is what a pinReq asks.
type pinOp uint8

const (
	pinList pinOp = iota
	pinAdd
	pinRemove
	pinEdit
)

// pinBoard is the branch's pinned facts: it answers pinReq, holding a
// pin or an edit to the limits (Config.Pins, MaxPinnedShare) before the
// branch records it.
type pinBoard struct{ c *branchCore }

// pin answers m: the branch's live pins (pinList), the pin added or
// edited, or okReply for an unpin.
func (p pinBoard) pin(ctx actor.Context, m *pinReq) (any, error) {
	if !p.c.b.Created {
		return nil, core.ErrNotCreated
	}
	var evs []messages.BranchEvent
	var err error
	switch m.op {
	case pinList:
		return append([]messages.PinnedFact{}, p.c.b.LivePins()...), nil
	case pinAdd:
		if evs, err = p.c.b.Pin(m.fact, p.c.rt.cfg.Pins, p.c.now()); err == nil && len(evs) > 0 {
			err = p.checkPinnedTokens(append(slices.Clone(p.c.b.State.Pinned), m.fact))
		}
	case pinRemove:
		evs, err = p.c.b.Unpin(m.id, p.c.now())
	case pinEdit:
		if evs, err = p.c.b.EditPin(m.id, m.fact, p.c.rt.cfg.Pins, p.c.now()); err == nil && len(evs) > 0 {
			pinned := slices.Clone(p.c.b.State.Pinned)
			for i, pin := range p.c.b.LivePins() {
				if pin.ID == m.id {
					pinned[i] = m.fact
				}
			}
			err = p.checkPinnedTokens(pinned)
		}
	}
	if err != nil {
		return nil, err
	}
	p.c.persistAll(ctx, evs)
	if m.op == pinRemove {
		return okReply{}, nil
	}
	for _, pin := range p.c.b.LivePins() {
		if pin.Fact == m.fact {
			return pin, nil
		}
	}
	return nil, fmt.Errorf("actors: pin %q is not pinned after it was recorded", m.fact)
}

// checkPinnedTokens checks that pinned, the branch's pinned facts after a
// pin or an edit, take at most cfg.MaxPinnedShare of the input budget of
// the branch's model, counted as the assembler counts them; a change
// that makes them smaller passes, so that a branch over the limit can
// edit its way back.
func (p pinBoard) checkPinnedTokens(pinned []string) error {
	m := p.c.rt.model(p.c.b.Model)
	budget := p.c.rt.budget(m)
	count := p.c.rt.counter(m)
	tokens := func(facts []string) int {
		n := 0
		for _, f := range facts {
			n += count(f) + 1
		}
		return n
	}
	limit := int(p.c.rt.cfg.MaxPinnedShare * float64(max(budget.Input(), 0)))
	after := tokens(pinned)
	if after <= limit || after <= tokens(p.c.b.State.Pinned) {
		return nil
	}
	return fmt.Errorf("%w: fact: the pinned facts would take %d tokens, limit %d (context.max_pinned_share %g of the input budget of %d tokens of model %s); unpin or shorten some first",
		core.ErrInvalid, after, limit, p.c.rt.cfg.MaxPinnedShare, budget.Input(), m.ID)
}

// Pin pins fact on branch: every later context of the branch shows it
// verbatim, until it is unpinned. It returns the pin, with the id that
// Unpin and EditPin take; a fact pinned already returns its pin and
// records nothing. A fact over the limits (Config.Pins, MaxPinnedShare)
// is refused with core.ErrInvalid naming the limit, and nothing is
// stored.
func (r *Runtime) Pin(ctx context.Context, branch messages.BranchID, fact string) (messages.PinnedFact, error) {
	res, err := r.ask(ctx, branch, &pinReq{op: pinAdd, fact: fact})
	if err != nil {
		return messages.PinnedFact{}, err
	}
	return res.(messages.PinnedFact), nil
}

// Pins returns the facts pinned on branch now, by id.
func (r *Runtime) Pins(ctx context.Context, branch messages.BranchID) ([]messages.PinnedFact, error) {
	res, err := r.ask(ctx, branch, &pinReq{op: pinList})
	if err != nil {
		return nil, err
	}
	return res.([]messages.PinnedFact), nil
}

// Unpin unpins pin id of branch: later contexts no longer show it (a
// fork at an earlier turn still does). A pin not pinned now gives
// core.ErrNoPin.
func (r *Runtime) Unpin(ctx context.Context, branch messages.BranchID, id uint64) error {
	_, err := r.ask(ctx, branch, &pinReq{op: pinRemove, id: id})
	return err
}

// EditPin replaces the text of pin id of branch by fact and returns the
// pin, which keeps its id and place. The limits of Pin apply; a pin not
// pinned now gives core.ErrNoPin.
func (r *Runtime) EditPin(ctx context.Context, branch messages.BranchID, id uint64, fact string) (messages.PinnedFact, error) {
	res, err := r.ask(ctx, branch, &pinReq{op: pinEdit, id: id, fact: fact})
	if err != nil {
		return messages.PinnedFact{}, err
	}
	return res.(messages.PinnedFact), nil
}

// PinLimits are the limits on pinned facts this runtime enforces
// (context.max_pins, context.max_pin_bytes), defaults filled in.
func (r *Runtime) PinLimits() core.PinLimits {
	l := r.cfg.Pins
	if l.MaxPins <= 0 {
		l.MaxPins = core.DefaultPinLimits.MaxPins
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = core.DefaultPinLimits.MaxBytes
	}
	return l
}
