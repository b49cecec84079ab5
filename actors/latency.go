package actors

import (
	"context"
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
// from the turn's row on the branch, where the fold and the index
// record them (none before they happen, nor for a turn folded or
// indexed before they were recorded, or whose summary came with an
// imported session).
type TurnLatency struct {
	Embed, Search, Assemble time.Duration
	Stream                  time.Duration
	Summarize, Index        time.Duration
}

// micros is d in whole microseconds for a turn row, at least 1 when d
// is not zero (0 is unknown).
func micros(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d.Microseconds(), 1)
}

// TurnLatency returns where the time of turn, on branch's transcript,
// went (see TurnLatency; its row is TurnRow's). A turn not on the
// transcript is persistence.ErrNodeNotFound.
func (r *Runtime) TurnLatency(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (TurnLatency, error) {
	row, err := r.TurnRow(ctx, branch, turn)
	if err != nil {
		return TurnLatency{}, err
	}
	steps, err := r.db.Steps(ctx, turn)
	if err != nil {
		return TurnLatency{}, err
	}
	out := TurnLatency{Summarize: time.Duration(row.SummarizeMicros) * time.Microsecond,
		Index: time.Duration(row.IndexMicros) * time.Microsecond}
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
	return out, nil
}
