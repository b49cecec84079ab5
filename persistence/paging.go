package persistence

import (
	"context"
	"math"

	"github.com/contextinfinity/ctxinf/messages"
)

// DAGView is one consistent read of an engine's turn DAG, with the
// overlays of the reader it was made for applied to the turns it returns.
// An engine implements it and Pager; the paging rules of Reader (Last,
// Before, Chain, Range) are written once, in Pager, over it.
type DAGView interface {
	// Head returns branch b's head.
	Head(b messages.BranchID) (Head, error)
	// Walk returns up to n turns from id towards the root, id first, and
	// the id where it stopped: zero when it reached the root. n is at
	// least 1 and id is not zero; an id that does not exist is an error
	// that errors.Is ErrNodeNotFound.
	Walk(id messages.NodeID, n int) ([]Node, messages.NodeID, error)
	// AncestorAt returns the ancestor at depth target of id, which is at
	// depth d; target is at most d.
	AncestorAt(id messages.NodeID, d, target uint64) (messages.NodeID, error)
}

// Pager answers Reader's Last, Before, Chain and Range over the DAGView
// of an engine.
type Pager struct {
	// View calls fn with one consistent view of the DAG, or returns the
	// engine's error (ErrClosed once it is closed) without calling it.
	View func(ctx context.Context, fn func(DAGView) error) error
}

// walk is v.Walk that returns no turn for n == 0 or a zero id.
func walk(v DAGView, id messages.NodeID, n int) ([]Node, messages.NodeID, error) {
	if n <= 0 || id.IsZero() {
		return nil, id, nil
	}
	return v.Walk(id, n)
}

// Last returns the last n turns of branch b, oldest first.
func (p Pager) Last(ctx context.Context, b messages.BranchID, n int) (Page, error) {
	if err := CheckPageSize(n); err != nil {
		return Page{}, err
	}
	var pg Page
	err := p.View(ctx, func(v DAGView) error {
		h, err := v.Head(b)
		if err != nil {
			return err
		}
		ts, rest, err := walk(v, h.Node, int(min(uint64(n), h.Len())))
		pg = page(ts, rest)
		return err
	})
	if err != nil {
		return Page{}, err
	}
	return pg, nil
}

// Before returns up to n turns strictly older than before on its
// ancestry, oldest first.
func (p Pager) Before(ctx context.Context, before messages.NodeID, n int) (Page, error) {
	if err := CheckPageSize(n); err != nil {
		return Page{}, err
	}
	if before.IsZero() {
		return Page{}, errZeroNode
	}
	var pg Page
	err := p.View(ctx, func(v DAGView) error {
		// The walk starts at before itself (which proves it exists) and
		// drops it.
		ts, rest, err := v.Walk(before, n+1)
		if err != nil {
			return err
		}
		pg = page(ts[1:], rest)
		return nil
	})
	if err != nil {
		return Page{}, err
	}
	return pg, nil
}

// Chain returns every turn from the root to id, oldest first.
func (p Pager) Chain(ctx context.Context, id messages.NodeID) ([]Node, error) {
	if id.IsZero() {
		return nil, errZeroNode
	}
	var ts []Node
	err := p.View(ctx, func(v DAGView) error {
		var err error
		ts, _, err = v.Walk(id, math.MaxInt32)
		return err
	})
	if err != nil {
		return nil, err
	}
	reverse(ts)
	return ts, nil
}

// Range returns branch b's turns at depths [start, start+limit), in
// O(log N + limit) turn reads.
func (p Pager) Range(ctx context.Context, b messages.BranchID, start uint64, limit int) (RangePage, error) {
	if err := CheckPageSize(limit); err != nil {
		return RangePage{}, err
	}
	var rp RangePage
	err := p.View(ctx, func(v DAGView) error {
		h, err := v.Head(b)
		if err != nil {
			return err
		}
		rp = RangePage{HeadDepth: h.Depth, Empty: h.Empty()}
		if h.Empty() || start > h.Depth || limit == 0 {
			return nil
		}
		end := min(start+uint64(limit)-1, h.Depth) // last depth wanted
		top, err := v.AncestorAt(h.Node, h.Depth, end)
		if err != nil {
			return err
		}
		ts, _, err := v.Walk(top, int(end-start+1))
		reverse(ts)
		rp.Nodes = ts
		return err
	})
	if err != nil {
		return RangePage{}, err
	}
	return rp, nil
}

func reverse(ts []Node) {
	for i, j := 0, len(ts)-1; i < j; i, j = i+1, j-1 {
		ts[i], ts[j] = ts[j], ts[i]
	}
}

// page turns a newest-first walk into a chronological page whose cursor
// is its oldest turn, or zero when the walk reached the root. A page of
// no turn has an empty Turns, not a nil one.
func page(ts []Node, rest messages.NodeID) Page {
	if ts == nil {
		ts = []Node{}
	}
	reverse(ts)
	p := Page{Nodes: ts}
	if !rest.IsZero() && len(ts) > 0 {
		p.Next = ts[0].ID
	}
	return p
}

// OverlayView is a reader's choice of overlays: every one (Latest), or
// those of Seq <= AsOf.
type OverlayView struct {
	Latest bool
	AsOf   uint64
}

// Apply returns t as the view shows it, given t's overlays in Seq order:
// the payload of the last one it includes.
func (v OverlayView) Apply(t Node, os []Overlay) Node {
	for i := len(os) - 1; i >= 0; i-- {
		if v.Latest || os[i].Seq <= v.AsOf {
			return ApplyOverlay(t, os[i])
		}
	}
	return t
}
