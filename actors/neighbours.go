package actors

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/internal/retrieval"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// excerpt is a run of consecutive chunks of a branch's conversation
// offered to a context as one piece of retrieved memory: one or more
// hits and the chunks around them. Its score is its best hit's, and it
// is named by that hit.
type excerpt struct {
	best  persistence.ChunkRow
	score float64
	rows  []persistence.ChunkRow // in the conversation's order
}

// text is the excerpt's chunks' texts in order, a line apart.
func (e excerpt) text() string { return excerptText(e.rows) }

// excerptText joins the texts of consecutive chunks, a line apart: the
// retrieved memory an excerpt shows (and context debug rebuilds).
func excerptText(rows []persistence.ChunkRow) string {
	texts := make([]string, len(rows))
	for i, r := range rows {
		texts[i] = r.Text
	}
	return strings.Join(texts, "\n")
}

// chunkPlace is where a chunk is in the conversation: its turn's seq,
// and its index among that turn's chunks (of n).
type chunkPlace struct {
	seq    uint64
	idx, n int
}

// follows reports whether b is the chunk right after a.
func (a chunkPlace) follows(b chunkPlace) bool {
	return (b.seq == a.seq && b.idx == a.idx+1) || (b.seq == a.seq+1 && a.idx == a.n-1 && b.idx == 0)
}

// turnChunks reads, once per call of excerpts, the chunk rows of the
// turn at a seq visible on a branch (its scopes), in the order of the
// turn's text: user message before reply, then by offset.
type turnChunks struct {
	m      *memory
	scopes []retrieval.Scope
	parts  []*partition // the scopes' indexes (memory.scopesWith)
	turns  map[uint64][]persistence.ChunkRow
}

func (t *turnChunks) at(ctx context.Context, seq uint64) ([]persistence.ChunkRow, error) {
	if rows, ok := t.turns[seq]; ok {
		return rows, nil
	}
	var rows []persistence.ChunkRow
	for i, s := range t.scopes {
		if seq > s.MaxSeq {
			continue
		}
		ids := s.Part.AtSeq(seq)
		rows = slices.Grow(rows, len(ids))
		for _, id := range ids {
			row, err := t.m.chunk(ctx, t.parts[i], id)
			if errors.Is(err, persistence.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		}
		if len(rows) > 0 {
			break
		}
	}
	slices.SortFunc(rows, func(a, b persistence.ChunkRow) int {
		return cmp.Or(a.Node.Compare(b.Node), cmp.Compare(a.Start, b.Start), a.ID.Compare(b.ID))
	})
	t.turns[seq] = rows
	return rows, nil
}

// place finds row among its turn's chunks.
func (t *turnChunks) place(ctx context.Context, row persistence.ChunkRow) (chunkPlace, error) {
	rows, err := t.at(ctx, row.Seq)
	if err != nil {
		return chunkPlace{}, err
	}
	idx := slices.IndexFunc(rows, func(r persistence.ChunkRow) bool { return r.ID == row.ID })
	if idx < 0 { // not indexed on this branch's scopes: alone
		return chunkPlace{seq: row.Seq, idx: 0, n: 1}, nil
	}
	return chunkPlace{seq: row.Seq, idx: idx, n: len(rows)}, nil
}

// step returns the chunk dir (-1 or 1) places from p, if there is one:
// within p's turn, else the last (or first) chunk of the turn before
// (after). The row is t's, not a copy.
func (t *turnChunks) step(ctx context.Context, p chunkPlace, dir int) (*persistence.ChunkRow, chunkPlace, bool, error) {
	if i := p.idx + dir; i >= 0 && i < p.n {
		rows, err := t.at(ctx, p.seq)
		if err != nil || i >= len(rows) {
			return nil, chunkPlace{}, false, err
		}
		return &rows[i], chunkPlace{seq: p.seq, idx: i, n: p.n}, true, nil
	}
	if dir < 0 && p.seq == 0 {
		return nil, chunkPlace{}, false, nil
	}
	seq := uint64(int64(p.seq) + int64(dir))
	rows, err := t.at(ctx, seq)
	if err != nil || len(rows) == 0 {
		return nil, chunkPlace{}, false, err
	}
	i := 0
	if dir < 0 {
		i = len(rows) - 1
	}
	return &rows[i], chunkPlace{seq: seq, idx: i, n: len(rows)}, true, nil
}

// around is excerpts with the runtime's retrieval.neighbours and
// neighbours_before, on branch, within budget tokens (0: no limit)
// counted with count.
func (m *memory) around(ctx context.Context, branch messages.BranchID, hits []Hit, exclude map[messages.TurnID]bool,
	budget int, count core.Counter) ([]excerpt, error) {
	if m.opts.Neighbours == 0 && m.opts.NeighboursBefore == 0 {
		return m.excerpts(ctx, nil, nil, hits, 0, 0, exclude, budget, count)
	}
	scopes, parts, err := m.scopesWith(ctx, branch, false) // as the search found the hits: loaded so far
	if err != nil {
		return nil, err
	}
	return m.excerpts(ctx, scopes, parts, hits, m.opts.Neighbours, m.opts.NeighboursBefore, exclude, budget, count)
}

// excerpts turns hits (best first) into the excerpts a context is
// offered, within budget tokens (0: no limit; each excerpt costs its
// text fenced, as the assembler counts it): first the hits,
// best first, each that fits; then, for each of those in the same
// order, up to after chunks after it and before chunks before it in the
// conversation while they fit (none of a turn in exclude: those are in
// the prompt verbatim). Chunks that touch are merged into one excerpt,
// named by its best hit and scored with its score; the excerpts come
// best first. With no neighbours each hit is an excerpt of its own.
func (m *memory) excerpts(ctx context.Context, scopes []retrieval.Scope, parts []*partition, hits []Hit, after, before int,
	exclude map[messages.TurnID]bool, budget int, count core.Counter) ([]excerpt, error) {
	if after == 0 && before == 0 {
		out := make([]excerpt, len(hits))
		for i, h := range hits {
			out[i] = excerpt{best: h.Chunk, score: h.Score, rows: []persistence.ChunkRow{h.Chunk}}
		}
		return out, nil
	}
	type member struct {
		row   *persistence.ChunkRow // a hit's, or tc's
		place chunkPlace
		hit   int // the index of the hit it came with (its own if a hit)
	}
	// At most each hit with its neighbours: sized once.
	members := make([]member, 0, len(hits)*(1+after+before))
	// A chunk costs its text fenced (core.ArtifactTokens) when it starts
	// an excerpt, and its text and the line break before it when it
	// joins one (a neighbour always does; a hit when it touches a chunk
	// already taken).
	used := 0
	fits := func(row *persistence.ChunkRow, p chunkPlace, joins bool) bool {
		cost := count(row.Text) + 1
		if !joins && !slices.ContainsFunc(members, func(m member) bool { return m.place.follows(p) || p.follows(m.place) }) {
			cost = core.ArtifactTokens(row.Text, count)
		}
		if budget > 0 && used+cost > budget {
			return false
		}
		used += cost
		return true
	}
	tc := &turnChunks{m: m, scopes: scopes, parts: parts, turns: map[uint64][]persistence.ChunkRow{}}
	seen := map[messages.ChunkID]bool{}
	for i := range hits {
		h := &hits[i]
		if seen[h.Chunk.ID] {
			continue
		}
		p, err := tc.place(ctx, h.Chunk)
		if err != nil {
			return nil, err
		}
		if !fits(&h.Chunk, p, false) {
			continue
		}
		seen[h.Chunk.ID] = true
		members = append(members, member{&h.Chunk, p, i})
	}
	for _, hm := range members { // the hits (range reads the length once): neighbours are appended
		for _, side := range [2]struct{ dir, n int }{{1, after}, {-1, before}} {
			dir, at := side.dir, hm.place
			for range side.n {
				row, next, ok, err := tc.step(ctx, at, dir)
				if err != nil {
					return nil, err
				}
				if !ok || exclude[row.SourceTurn] {
					break
				}
				at = next
				if seen[row.ID] {
					continue
				}
				if !fits(row, next, true) {
					break
				}
				seen[row.ID] = true
				members = append(members, member{row, next, hm.hit})
			}
		}
	}
	slices.SortFunc(members, func(a, b member) int {
		return cmp.Or(cmp.Compare(a.place.seq, b.place.seq), cmp.Compare(a.place.idx, b.place.idx))
	})
	var out []excerpt
	// The excerpts are runs of members: their rows share one array.
	rows := make([]persistence.ChunkRow, len(members))
	best := -1 // the best hit of the excerpt being built
	done := func() {
		if best >= 0 {
			out[len(out)-1].best, out[len(out)-1].score = hits[best].Chunk, hits[best].Score
		}
	}
	start := 0 // where the excerpt being built starts in members
	for i, mb := range members {
		if i == 0 || !members[i-1].place.follows(mb.place) {
			done()
			out = append(out, excerpt{})
			best, start = -1, i
		}
		e := &out[len(out)-1]
		rows[i] = *mb.row
		e.rows = rows[start : i+1 : i+1]
		if mb.row.ID == hits[mb.hit].Chunk.ID && (best < 0 || mb.hit < best) {
			best = mb.hit
		}
	}
	done()
	// Every excerpt holds a hit: neighbours are added only beside one.
	slices.SortStableFunc(out, func(a, b excerpt) int { return cmp.Compare(b.score, a.score) })
	return out, nil
}
