package actors

import (
	"strings"
	"sync"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// Update is one thing that happened to a turn in flight, in order: text
// deltas as they stream, the journal's displayed/durable byte counters,
// and finally Done.
type Update struct {
	Delta string // streamed text (may be empty)
	// Item is a tool call as it is issued, or a tool output as it is
	// recorded (enabled tool mode); nil otherwise.
	Item      messages.TranscriptItem
	Displayed uint64 // journal bytes shown so far
	Durable   uint64 // journal bytes fsynced so far
	// TextDisplayed is the bytes of text shown so far (the deltas'),
	// TextDurable those whose journal records are fsynced: the header's
	// "Stream: durable/displayed" (SRD §13.3). TextDurable <=
	// TextDisplayed; they are equal at Done once the response is
	// committed.
	TextDisplayed, TextDurable uint64

	Done  bool               // the turn reached its end (finalized or failed)
	Phase messages.TurnPhase // with Done: ResponseFinalized or Failed
	// Outcome, with Done, is how the turn ended: the final step's
	// outcome, or for Phase Failed messages.FailedOutcome (kind failed
	// or cancelled, Code one of messages' Fail* codes, Message why).
	Outcome messages.StepOutcome
	Err     string // with Done and Phase Failed: why (Outcome.Message)
	// RetryAfter, with Done and Phase Failed, is the wait the model's
	// provider asked for (its Retry-After) when it failed the turn; 0
	// when it asked none.
	RetryAfter time.Duration
	// Repeat, with Done, says this answers a repeat of the request under
	// its idempotency key, and the turn had ended before the repeat came:
	// it is how the turn ended, not a new attempt.
	Repeat bool
	// Awaiting, with Done, says the turn has not ended but waits for the
	// results of the client tool calls in Calls (ClientTurn.Tools); Phase
	// is Responding and Outcome Paused{tool_use}. SubmitToolResults goes
	// on with it.
	Awaiting bool
	Calls    []messages.ToolCall
	// StepLimit, with Done, is tools.max_steps when the turn went past
	// it: its model called the runtime's tools in more steps than that,
	// and the calls past the limit were answered "not executed" (the
	// turn finalized Incomplete{tool_step_limit}, or awaiting the
	// client's calls of that step, which are never held back); 0
	// otherwise.
	StepLimit int
	// Usage, with Done, is the tokens used by the provider steps that ran
	// for this stream (since the turn's acceptance, or since
	// SubmitToolResults), as the providers reported them.
	Usage providers.Usage
	// Model, with Done, is the id of the model that ran the stream's
	// last step: the one the upstream named in its answer, else the
	// configured model id ("" when no step ran). A step's streamed
	// updates carry the configured id of the model it runs on.
	Model string
}

// TurnStream delivers a turn's updates to one reader. The branch actor
// never blocks on it: updates queue without bound until read. A repeat of
// the request that made the turn (by its idempotency key) reads a
// follower (follow): what was pushed so far, then every later update.
type TurnStream struct {
	Branch messages.BranchID
	Turn   messages.TurnID
	Seq    uint64

	mu     sync.Mutex
	queue  []Update
	notify chan struct{}
	done   bool
	// seen is what was pushed so far, a run of deltas merged into one
	// update (run holds the current run's text), for a follower to
	// start from; last is the Done update, once pushed.
	seen      []Update
	run       strings.Builder
	last      Update
	followers []*TurnStream
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
	if s.queue == nil {
		s.queue = reusedQueue()
	}
	s.queue = append(s.queue, u)
	s.done = u.Done
	s.record(u)
	for _, f := range s.followers {
		f.push(u)
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// record keeps u for followers; s.mu is held.
func (s *TurnStream) record(u Update) {
	switch {
	case u.Done:
		s.last = u
	case u.Item == nil:
		s.run.WriteString(u.Delta)
		s.last.setCounters(u.counters())
	default:
		s.seen = append(s.seen, s.runUpdate(), u)
		s.run.Reset()
	}
}

// runUpdate is the current run of deltas as one update; s.mu is held.
func (s *TurnStream) runUpdate() Update {
	u := Update{Delta: s.run.String()}
	u.setCounters(s.last.counters())
	return u
}

// streamCounters are a turn's stream counters (SRD §13.3): the bytes of
// its journals and of its text, displayed and durable.
type streamCounters struct {
	displayed, durable         uint64 // journal bytes
	textDisplayed, textDurable uint64 // text bytes
}

// plus returns c with o added.
func (c streamCounters) plus(o streamCounters) streamCounters {
	return streamCounters{displayed: c.displayed + o.displayed, durable: c.durable + o.durable,
		textDisplayed: c.textDisplayed + o.textDisplayed, textDurable: c.textDurable + o.textDurable}
}

// allDurable returns c with everything displayed durable.
func (c streamCounters) allDurable() streamCounters {
	c.durable, c.textDurable = c.displayed, c.textDisplayed
	return c
}

// counters returns u's counters.
func (u Update) counters() streamCounters {
	return streamCounters{displayed: u.Displayed, durable: u.Durable, textDisplayed: u.TextDisplayed, textDurable: u.TextDurable}
}

// setCounters sets u's counters to c.
func (u *Update) setCounters(c streamCounters) {
	u.Displayed, u.Durable, u.TextDisplayed, u.TextDurable = c.displayed, c.durable, c.textDisplayed, c.textDurable
}

// withCounters returns u with counters c.
func (u Update) withCounters(c streamCounters) Update {
	u.setCounters(c)
	return u
}

// follow returns a stream for another reader of this turn: it starts
// with what was pushed so far (the text as one delta) and then gets
// every update pushed to s, to the end.
func (s *TurnStream) follow() *TurnStream {
	f := newTurnStream(s.Branch, s.Turn, s.Seq)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.seen {
		if u.Item != nil || u.Delta != "" {
			f.queue = append(f.queue, u)
		}
	}
	if s.run.Len() > 0 {
		f.queue = append(f.queue, s.runUpdate())
	}
	if s.done {
		f.queue = append(f.queue, s.last)
		f.done = true
	} else {
		s.followers = append(s.followers, f)
	}
	return f
}

// Last returns the stream's Done update and true once it was pushed
// (whether or not it was read), else false.
func (s *TurnStream) Last() (Update, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.done
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
		recycleQueue(us) // read: no one else holds it
	}
}

// queues are queues of updates read to their end (by Wait) for the next
// streams to push to: a turn's stream queues tens of updates of 240
// bytes, and a queue grown by append from nothing allocated about twice
// what it held (9 % of the bytes a bench turns load allocated).
var queues sync.Pool

// maxReusedQueue bounds the queues kept for reuse.
const maxReusedQueue = 1024

// reusedQueue returns an empty queue to push to, nil if none is kept.
func reusedQueue() []Update {
	if q, ok := queues.Get().(*[]Update); ok {
		return (*q)[:0]
	}
	return nil
}

// recycleQueue keeps q, read and held by no one, for reuse.
func recycleQueue(q []Update) {
	if cap(q) > maxReusedQueue {
		return
	}
	clear(q) // the updates' texts and items go
	q = q[:0]
	queues.Put(&q)
}
