package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// ErrNoPin is returned by Unpin and EditPin when the branch has no pinned
// fact with that id (never pinned, or unpinned already).
var ErrNoPin = errors.New("core: no such pin")

// PinLimits bounds what a branch may pin (config context.max_pins and
// context.max_pin_bytes). A zero field takes its DefaultPinLimits value.
// They bind new pins and edits only: a log replays whatever it holds.
type PinLimits struct {
	MaxPins  int // facts pinned at once
	MaxBytes int // bytes of one fact
}

// DefaultPinLimits are the limits of a zero PinLimits.
var DefaultPinLimits = PinLimits{MaxPins: 64, MaxBytes: 2048}

func (l PinLimits) orDefault() PinLimits {
	if l.MaxPins <= 0 {
		l.MaxPins = DefaultPinLimits.MaxPins
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultPinLimits.MaxBytes
	}
	return l
}

// Pin is one version of a pinned fact in a branch's pin history: the text
// the pin had from turn_seq Seq on, until it was unpinned or edited
// (Ended) when the branch's turn_seq was Until. A version is in effect at
// turn_seq t when Seq <= t and, if it ended, t < Until.
type Pin struct {
	messages.PinnedFact
	Ended bool   `json:"ended,omitempty"`
	Until uint64 `json:"until,omitempty"`
}

// inEffect reports whether p is in effect once the branch's turn_seq
// has reached seq, before turn seq+1 is accepted.
func (p Pin) inEffect(seq uint64) bool {
	return p.Seq <= seq && (!p.Ended || seq < p.Until)
}

// LivePins returns the facts pinned now, by id: State.Pinned with ids.
func (b *Branch) LivePins() []messages.PinnedFact {
	var out []messages.PinnedFact
	for _, p := range b.Pins {
		if !p.Ended {
			out = append(out, p.PinnedFact)
		}
	}
	slices.SortStableFunc(out, func(x, y messages.PinnedFact) int { return cmpUint(x.ID, y.ID) })
	return out
}

// PinsAt returns the facts that were pinned when turn seq was the
// branch's latest turn, by id: pinned (or edited to that text) while
// turn_seq was at most seq and not unpinned or edited again before turn
// seq+1 was accepted. A fork after turn seq starts with them. seq at or
// past TurnSeq gives LivePins.
func (b *Branch) PinsAt(seq uint64) []messages.PinnedFact {
	if seq >= b.TurnSeq {
		return b.LivePins()
	}
	var out []messages.PinnedFact
	for _, p := range b.Pins {
		if p.inEffect(seq) {
			out = append(out, p.PinnedFact)
		}
	}
	slices.SortStableFunc(out, func(x, y messages.PinnedFact) int { return cmpUint(x.ID, y.ID) })
	return out
}

// PinFacts returns the texts of pins, in order: a state's Pinned.
func PinFacts(pins []messages.PinnedFact) []string {
	if len(pins) == 0 {
		return nil
	}
	out := make([]string, len(pins))
	for i, p := range pins {
		out[i] = p.Fact
	}
	return out
}

func cmpUint(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// live returns the index in b.Pins of the current version of pin id, or
// -1.
func (b *Branch) live(id uint64) int {
	return slices.IndexFunc(b.Pins, func(p Pin) bool { return p.ID == id && !p.Ended })
}

// livePinned returns the live pin whose text is fact, if any.
func (b *Branch) livePinned(fact string) (messages.PinnedFact, bool) {
	for _, p := range b.Pins {
		if !p.Ended && p.Fact == fact {
			return p.PinnedFact, true
		}
	}
	return messages.PinnedFact{}, false
}

// Pin pins fact, kept verbatim in every later state, as pin PinSeq+1. It
// must be 1 to lim.MaxBytes bytes and the branch may hold at most
// lim.MaxPins facts, else ErrInvalid naming the field and the limit.
// Pinning a fact pinned already records nothing. Pinning bumps the
// epoch, so that a summary computed before the pin is stale.
func (b *Branch) Pin(fact string, lim PinLimits, now time.Time) ([]messages.BranchEvent, error) {
	if !b.Created {
		return nil, ErrNotCreated
	}
	lim = lim.orDefault()
	if len(fact) > lim.MaxBytes {
		return nil, invalid("fact: %d bytes, limit %d (context.max_pin_bytes)", len(fact), lim.MaxBytes)
	}
	if fact == "" {
		return nil, invalid("fact: required")
	}
	if _, ok := b.livePinned(fact); ok {
		return nil, nil
	}
	if n := len(b.State.Pinned); n >= lim.MaxPins {
		return nil, invalid("fact: the branch has %d pinned facts, limit %d (context.max_pins); unpin one first", n, lim.MaxPins)
	}
	return b.decide(messages.FactPinned{Fact: fact, At: now.UTC()})
}

// Unpin unpins pin id: later states and contexts no longer show it. A pin
// that is not pinned now gives ErrNoPin. Like Pin it bumps the epoch.
func (b *Branch) Unpin(id uint64, now time.Time) ([]messages.BranchEvent, error) {
	if !b.Created {
		return nil, ErrNotCreated
	}
	return b.decide(messages.FactUnpinned{Pin: id, At: now.UTC()})
}

// EditPin replaces the text of pin id by fact, which must be 1 to
// lim.MaxBytes bytes and not the text of another pin (ErrInvalid); the pin
// keeps its id and its place. The same text records nothing; a pin not
// pinned now gives ErrNoPin. Like Pin it bumps the epoch.
func (b *Branch) EditPin(id uint64, fact string, lim PinLimits, now time.Time) ([]messages.BranchEvent, error) {
	if !b.Created {
		return nil, ErrNotCreated
	}
	lim = lim.orDefault()
	if len(fact) > lim.MaxBytes {
		return nil, invalid("fact: %d bytes, limit %d (context.max_pin_bytes)", len(fact), lim.MaxBytes)
	}
	if i := b.live(id); i >= 0 && b.Pins[i].Fact == fact {
		return nil, nil
	}
	if p, ok := b.livePinned(fact); ok && p.ID != id {
		return nil, invalid("fact: pinned already as pin %d", p.ID)
	}
	return b.decide(messages.FactEdited{Pin: id, Fact: fact, At: now.UTC()})
}

// checkPin checks that pin id is pinned now.
func (b *Branch) checkPin(id uint64) error {
	if id == 0 {
		return invalid("pin: required")
	}
	if b.live(id) < 0 {
		return fmt.Errorf("%w: pin %d is not pinned on branch %s", ErrNoPin, id, b.ID)
	}
	return nil
}

// applyPin applies a FactPinned, FactUnpinned or FactEdited event.
func (b *Branch) applyPin(ev messages.BranchEvent) {
	switch ev := ev.(type) {
	case messages.FactPinned:
		b.PinSeq++
		b.Pins = append(b.Pins, Pin{PinnedFact: messages.PinnedFact{ID: b.PinSeq, Fact: ev.Fact, Seq: b.TurnSeq, At: ev.At.UTC()}})
	case messages.FactUnpinned:
		b.endPin(ev.Pin)
	case messages.FactEdited:
		b.endPin(ev.Pin)
		b.Pins = append(b.Pins, Pin{PinnedFact: messages.PinnedFact{ID: ev.Pin, Fact: ev.Fact, Seq: b.TurnSeq, At: ev.At.UTC()}})
	}
	b.State.Pinned = PinFacts(b.LivePins())
	b.Epoch++
}

// endPin ends the live version of pin id at the current turn_seq. A
// version that began at this turn_seq was never in effect at the end of
// a turn (see PinsAt) and is dropped from the history.
func (b *Branch) endPin(id uint64) {
	i := b.live(id)
	if b.Pins[i].Seq == b.TurnSeq {
		b.Pins = cloneList(slices.Delete(slices.Clone(b.Pins), i, i+1))
		return
	}
	b.Pins = slices.Clone(b.Pins)
	b.Pins[i].Ended, b.Pins[i].Until = true, b.TurnSeq
}

// createPins sets the pin history of a branch created from ev: ev.Pins,
// or State.Pinned numbered 1, 2, … when the event has no pins (logs
// written before pins had ids).
func (b *Branch) createPins(ev messages.BranchCreated) {
	if len(ev.Pins) == 0 {
		b.numberPins(ev.At)
		return
	}
	b.Pins = make([]Pin, len(ev.Pins))
	for i, p := range ev.Pins {
		p.At = p.At.UTC()
		b.Pins[i] = Pin{PinnedFact: p}
		b.PinSeq = max(b.PinSeq, p.ID)
	}
}

// numberPins gives the facts of State.Pinned the ids 1, 2, … in order,
// in effect from the start of the branch, when the branch has no pin
// history: a snapshot or a branch created before pins had ids.
func (b *Branch) numberPins(at time.Time) {
	if len(b.Pins) > 0 || len(b.State.Pinned) == 0 {
		return
	}
	b.Pins = make([]Pin, len(b.State.Pinned))
	for i, f := range b.State.Pinned {
		b.Pins[i] = Pin{PinnedFact: messages.PinnedFact{ID: uint64(i + 1), Fact: f, At: at.UTC()}}
	}
	b.PinSeq = uint64(len(b.Pins))
}

// checkCreatedPins checks the pins of a BranchCreated: ids from 1 up,
// increasing, each pinned at or before the fork point, with the texts of
// State.Pinned in order.
func checkCreatedPins(ev messages.BranchCreated) error {
	if len(ev.Pins) == 0 {
		return nil
	}
	if !slices.Equal(PinFacts(ev.Pins), ev.State.Pinned) {
		return invalid("pins: %q, want the facts of state.pinned %q", PinFacts(ev.Pins), ev.State.Pinned)
	}
	var prev uint64
	for i, p := range ev.Pins {
		switch {
		case p.ID <= prev:
			return invalid("pins[%d].id: %d, want more than %d", i, p.ID, prev)
		case p.Seq > ev.TurnSeq:
			return invalid("pins[%d].seq: %d is after the fork point's turn_seq %d", i, p.Seq, ev.TurnSeq)
		}
		prev = p.ID
	}
	return nil
}

// UnmarshalJSON decodes a snapshot of b. A snapshot written before pins
// had ids has no pin history: its pinned facts are numbered 1, 2, … in
// order, the ids replaying its log gives them (facts could not be
// unpinned then); only the turn_seq each was pinned at is lost.
func (b *Branch) UnmarshalJSON(data []byte) error {
	type plain Branch
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*b = Branch(p)
	b.numberPins(time.Time{})
	return nil
}
