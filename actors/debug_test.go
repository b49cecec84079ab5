package actors

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// The context of every past turn, rebuilt from the store, is exactly the
// one the provider received; the next turn's can be looked at too.
func TestDebugContextRebuildsWhatWasSent(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	cfg := testConfig(t, t.TempDir(), ev)
	f := fake.New().WithContextLimit(900)
	cfg.Provider, cfg.MaxOutputTokens, cfg.SafetyMargin = f, 100, 10
	cfg.Fold = &core.Policy{K: 2, B: 2}
	cfg.Summarize = func(_ context.Context, prev string, ex []core.Exchange) (string, error) {
		return core.FallbackSummary(prev, ex), nil
	}
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "debug")
	if _, err := r.Pin(bg, b.ID, "The deploy target is eu-west-1."); err != nil {
		t.Fatal(err)
	}
	para := strings.Repeat("detail ", 60)
	for i := range 6 {
		runTurn(t, r, b.ID, fmt.Sprintf("turn %d: %s", i, para))
	}
	rows, _ := r.DB().TurnRows(bg, b.ID, 0, 10)
	reqs := f.Requests()
	if len(rows) != 6 || len(reqs) != 6 {
		t.Fatalf("%d turns, %d requests", len(rows), len(reqs))
	}
	shrunk := false
	for i, row := range rows {
		d, err := r.DebugContext(bg, b.ID, row.ID)
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		if !d.Matches || d.SentHash == "" {
			t.Errorf("turn %d: rebuilt %s, sent %s", i, d.RebuiltHash, d.SentHash)
		}
		sent := reqs[i].Context
		if !reflect.DeepEqual(d.Context.Pending, sent.Pending) || !reflect.DeepEqual(d.Context.Window, sent.Window) ||
			d.Context.Summary != sent.Summary || d.Context.User.RenderedText != sent.User.RenderedText ||
			!reflect.DeepEqual(d.Context.PinnedFacts, sent.PinnedFacts) {
			t.Errorf("turn %d: the rebuilt context differs from the request the provider got", i)
		}
		if d.Report.Total > d.Report.Budget.Input() {
			t.Errorf("turn %d: %d tokens over a budget of %d", i, d.Report.Total, d.Report.Budget.Input())
		}
		shrunk = shrunk || len(d.Report.Shrink) > 0
	}
	if !shrunk {
		t.Errorf("no turn needed shrinking: the test no longer covers it")
	}
	next, err := r.DebugNextContext(bg, b.ID, "what next?")
	if err != nil || next.Context.User.RenderedText != "what next?" || len(next.Report.Sections) != 7 {
		t.Fatalf("next context: %+v, %v", next.Report, err)
	}
	if _, err := r.DebugContext(bg, b.ID, messages.NewID[messages.TurnID](time.Now())); err == nil {
		t.Errorf("a turn that does not exist was debugged")
	}
}
