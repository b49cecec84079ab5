package actors

import (
	"context"
	"sync"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// TurnLatency is where a turn's time went (SRD §15.1): building the
// context of its first provider step (embedding the retrieval query,
// the search, the whole assembly), its provider steps from start to end,
// and, once done, the summarizer's call that folded it and the chunking
// and embedding that indexed it. Zero is unknown: the context's parts
// come from the step's recipe (none in recipes written before they were
// recorded, nor for a recorded or imported turn), Summarize and Index
// from this runtime's memory of its last turns (MaxLatencyTurns: a
// restart forgets them).
type TurnLatency struct {
	Embed, Search, Assemble time.Duration
	Stream                  time.Duration
	Summarize, Index        time.Duration
}

// MaxLatencyTurns is how many turns' summarize and index latency a
// runtime keeps in memory.
const MaxLatencyTurns = 1 << 16

// turnLatencies is the summarize and index latency of the last
// MaxLatencyTurns turns, the oldest forgotten first.
type turnLatencies struct {
	mu    sync.Mutex
	turns map[messages.TurnID]*TurnLatency
	order []messages.TurnID // a ring: next is the slot written next
	next  int
}

func (l *turnLatencies) get(turn messages.TurnID) *TurnLatency {
	if l.turns == nil {
		l.turns = map[messages.TurnID]*TurnLatency{}
	}
	if t, ok := l.turns[turn]; ok {
		return t
	}
	t := &TurnLatency{}
	if len(l.order) < MaxLatencyTurns {
		l.order = append(l.order, turn)
	} else {
		delete(l.turns, l.order[l.next])
		l.order[l.next] = turn
		l.next = (l.next + 1) % MaxLatencyTurns
	}
	l.turns[turn] = t
	return t
}

func (l *turnLatencies) summarized(turn messages.TurnID, took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.get(turn).Summarize = took
}

func (l *turnLatencies) indexed(turn messages.TurnID, took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.get(turn).Index = took
}

// TurnLatency returns where turn's time went (see TurnLatency).
func (r *Runtime) TurnLatency(ctx context.Context, turn messages.TurnID) (TurnLatency, error) {
	steps, err := r.db.Steps(ctx, turn)
	if err != nil {
		return TurnLatency{}, err
	}
	var out TurnLatency
	for i, s := range steps {
		if i == 0 && s.Context != nil && s.Context.Latency != nil {
			lat := s.Context.Latency
			out.Embed = time.Duration(lat.EmbedMicros) * time.Microsecond
			out.Search = time.Duration(lat.SearchMicros) * time.Microsecond
			out.Assemble = time.Duration(lat.AssembleMicros) * time.Microsecond
		}
		if !s.Started.IsZero() && s.Ended.After(s.Started) {
			out.Stream += s.Ended.Sub(s.Started)
		}
	}
	r.latency.mu.Lock()
	if t, ok := r.latency.turns[turn]; ok {
		out.Summarize, out.Index = t.Summarize, t.Index
	}
	r.latency.mu.Unlock()
	return out, nil
}
