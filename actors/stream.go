package actors

import (
	"sync"

	"github.com/contextinfinity/ctxinf/messages"
)

// Update is one thing that happened to a turn in flight, in order: text
// deltas as they stream, the journal's displayed/durable byte counters,
// and finally Done.
type Update struct {
	Delta string // streamed text (may be empty)
	// Item is a tool call as it is issued, or a tool output as it is
	// recorded (enabled tool mode); nil otherwise.
	Item      messages.TranscriptItem
	Displayed uint64             // journal bytes shown so far
	Durable   uint64             // journal bytes fsynced so far
	Done      bool               // the turn reached its end (finalized or failed)
	Phase     messages.TurnPhase // with Done: ResponseFinalized or Failed
	// Outcome, with Done, is how the turn ended: the final step's
	// outcome, or for Phase Failed messages.FailedOutcome (kind failed
	// or cancelled, Code one of messages' Fail* codes, Message why).
	Outcome messages.StepOutcome
	Err     string // with Done and Phase Failed: why (Outcome.Message)
}

// TurnStream delivers a turn's updates to one reader. The branch actor
// never blocks on it: updates queue without bound until read.
type TurnStream struct {
	Branch messages.BranchID
	Turn   messages.TurnID
	Seq    uint64

	mu     sync.Mutex
	queue  []Update
	notify chan struct{}
	done   bool
}

func newTurnStream(b messages.BranchID, t messages.TurnID, seq uint64) *TurnStream {
	return &TurnStream{Branch: b, Turn: t, Seq: seq, notify: make(chan struct{}, 1)}
}

func (s *TurnStream) push(u Update) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	s.queue = append(s.queue, u)
	s.done = u.Done
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Next returns the next updates, waiting for at least one unless the
// stream has ended. It returns nil after Done was delivered, or when stop
// is closed.
func (s *TurnStream) Next(stop <-chan struct{}) []Update {
	for {
		s.mu.Lock()
		q := s.queue
		s.queue = nil
		ended := s.done
		s.mu.Unlock()
		if len(q) > 0 {
			return q
		}
		if ended {
			return nil
		}
		select {
		case <-s.notify:
		case <-stop:
			return nil
		}
	}
}

// Wait reads the stream to its end and returns the full text and the
// final update.
func (s *TurnStream) Wait(stop <-chan struct{}) (string, Update) {
	var text []byte
	var last Update
	for {
		us := s.Next(stop)
		if us == nil {
			return string(text), last
		}
		for _, u := range us {
			text = append(text, u.Delta...)
			if u.Done {
				last = u
			}
		}
	}
}
