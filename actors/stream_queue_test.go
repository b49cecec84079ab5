package actors

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/messages"
)

// pushTurn pushes n deltas and a Done update to s.
func pushTurn(s *TurnStream, prefix string, n int) {
	for i := range n {
		s.push(Update{Delta: fmt.Sprintf("%s%d ", prefix, i), TextDisplayed: uint64(i)})
	}
	s.push(Update{Done: true, Phase: messages.PhaseResponseFinalized})
}

// Streams read one after another, whose queues are reused, each give
// their own updates only, in order.
func TestStreamsReuseQueuesReadToTheEnd(t *testing.T) {
	t.Parallel()
	for i := range 50 {
		s := newTurnStream(messages.BranchID{1}, messages.TurnID{byte(i)}, uint64(i))
		prefix := fmt.Sprintf("t%d-", i)
		pushTurn(s, prefix, 1+i%40)
		text, last := s.Wait(nil)
		var want strings.Builder
		for j := range 1 + i%40 {
			fmt.Fprintf(&want, "%s%d ", prefix, j)
		}
		if text != want.String() || !last.Done || last.Phase != messages.PhaseResponseFinalized {
			t.Fatalf("stream %d: Wait() = %q, %+v; want %q, its Done update", i, text, last, want.String())
		}
		// A queue read by Next is the reader's: reused by no stream.
		s2 := newTurnStream(messages.BranchID{2}, messages.TurnID{byte(i)}, uint64(i))
		pushTurn(s2, "n", 3)
		held := s2.Next(nil)
		pushTurn(newTurnStream(messages.BranchID{3}, messages.TurnID{}, 0), "other", 40)
		if len(held) != 4 || held[0].Delta != "n0 " || !held[3].Done {
			t.Fatalf("stream %d: the updates Next returned changed: %+v", i, held)
		}
	}
}

// BenchmarkTurnStreamWait pushes a turn's 60 updates to a stream and
// reads them with Wait, as bench turns does each turn: the queues it
// reads are reused by the next streams.
func BenchmarkTurnStreamWait(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		s := newTurnStream(messages.BranchID{1}, messages.TurnID{1}, 1)
		for i := range 60 {
			s.push(Update{Delta: "word ", TextDisplayed: uint64(i)})
		}
		s.push(Update{Done: true, Phase: messages.PhaseResponseFinalized})
		s.Wait(nil)
	}
}
