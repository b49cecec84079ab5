package actors

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/retrieval"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Who said an imported turn and when reach its chunks, and a search
// filtered by them returns up to its count of what it keeps, also once
// the index is loaded from the store again; a live turn's chunks carry
// their role and their turn's time.
func TestImportedSpeakerAndTimeReachTheChunks(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	cfg := indexedConfig(t, ev)
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "said")
	day0 := time.Date(2023, 5, 1, 18, 0, 0, 0, time.UTC)
	var xs []Exchange
	for i := range 12 {
		user := messages.NewMessage(messages.RoleUser, messages.Text{Text: fmt.Sprintf("note %d about the garden", i)})
		user.Speaker, user.Time = []string{"Ana Lima", "Ben"}[i%2], day0.AddDate(0, 0, i/2)
		if i == 0 {
			user = messages.NewMessage(messages.RoleUser, messages.Text{Text: "the garden, the garden, the garden"})
			user.Speaker, user.Time = "Ben", day0
		}
		xs = append(xs, Exchange{User: user, Reply: messages.NewMessage(messages.RoleAssistant)})
	}
	bad := xs[1]
	bad.User.Speaker = "Ana\nLima"
	if _, err := r.Import(bg, b.ID, []Exchange{xs[0], bad}); !errors.Is(err, persistence.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "exchanges[1].user.speaker: holds control character U+000A") {
		t.Fatalf("an import with a bad speaker: %v", err)
	}
	ids, err := r.Import(bg, b.ID, xs)
	if err != nil {
		t.Fatal(err)
	}
	waitIndexed(t, r, b.ID, ev, len(xs))
	rows, err := r.DB().Chunks(bg, ids[3].Turn)
	if err != nil || len(rows) != 1 || rows[0].Speaker != "Ben" || !rows[0].Time.Equal(day0.AddDate(0, 0, 1)) {
		t.Fatalf("chunks of turn 4: %+v, %v; want Ben's, of 2 May", rows, err)
	}
	check := func(r *Runtime) {
		t.Helper()
		o := r.RankOptions()
		o.TopK, o.MaxK = 3, 3
		for _, tc := range []struct {
			f    retrieval.Filter
			keep func(i int) bool
		}{
			{retrieval.Filter{Speaker: "ana lima"}, func(i int) bool { return i%2 == 0 && i > 0 }},
			{retrieval.Filter{From: day0.AddDate(0, 0, 2), To: day0.AddDate(0, 0, 4)}, func(i int) bool { return i >= 4 && i < 8 }},
			{retrieval.Filter{Speaker: "Ben", From: day0.AddDate(0, 0, 3)}, func(i int) bool { return i%2 == 1 && i >= 6 }},
		} {
			hits, err := r.SearchWith(bg, b.ID, "the garden", &o, tc.f)
			if err != nil || len(hits) != 3 {
				t.Fatalf("SearchWith(%+v) = %d hits, %v; want 3", tc.f, len(hits), err)
			}
			for _, h := range hits {
				if i := slices.IndexFunc(ids, func(p messages.PendingTurn) bool { return p.Turn == h.Chunk.SourceTurn }); !tc.keep(i) {
					t.Errorf("SearchWith(%+v): a hit of turn %d", tc.f, i)
				}
			}
		}
		if _, err := r.SearchWith(bg, b.ID, "the garden", nil, retrieval.Filter{Speaker: "Zed"}); !errors.Is(err, persistence.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), `speaker: "Zed", want user, assistant, tool or a participant of the branch's turns (Ben, Ana Lima)`) {
			t.Errorf("a speaker who is no participant: %v", err)
		}
	}
	check(r)
	// A live turn: its role and its turn's time.
	before := time.Now().Add(-time.Minute)
	runTurn(t, r, b.ID, "what grows in the garden")
	waitIndexed(t, r, b.ID, ev, len(xs)+1)
	hits, err := r.SearchWith(bg, b.ID, "garden", nil, retrieval.Filter{Speaker: "assistant", From: before})
	if err != nil || len(hits) == 0 {
		t.Fatalf("the live turn's reply: %v, %v", hits, err)
	}
	for _, h := range hits {
		if h.Chunk.Role() != "assistant" || h.Chunk.Speaker != "" || h.Chunk.Said().Before(before) || !h.Chunk.Time.IsZero() {
			t.Errorf("a live reply's chunk: role %s, speaker %q, said %v, time %v", h.Chunk.Role(), h.Chunk.Speaker, h.Chunk.Said(), h.Chunk.Time)
		}
	}
	// The index loaded from the store holds them too.
	r2 := reopenIndexed(t, r)
	check(r2)
}
