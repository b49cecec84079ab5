package chat

import (
	"context"
	"fmt"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/internal/tui"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
	"github.com/contextinfinity/ctxinf/providers/local"
)

// tuiFacts are the user turns of the backend test, one detail each.
var tuiFacts = []string{
	"The staging database runs on host db-stage-7 in Frankfurt.",
	"Our release train leaves every second Tuesday at noon.",
	"The billing service is written in Rust and owned by Priya.",
	"Invoices are archived to the bucket s3://acme-invoices for seven years.",
	"The mobile app uses Kotlin Multiplatform for shared code.",
	"Customer support escalations go to the pager rotation named sunrise.",
	"The design review happens on Thursdays in room Aurora.",
}

// tuiRuntime opens an embedded runtime on a temporary directory with the
// local model as its default and a second one, "alt", to select.
func tuiRuntime(t *testing.T) *ctxinf.Runtime {
	t.Helper()
	store := badgerdb.TestOptions("")
	store.Durability = persistence.DurabilityRelaxed
	cfg := actors.Config{DataDir: t.TempDir(), Store: store, Provider: local.New(local.Options{}), Model: "local",
		Models:         map[string]actors.Model{"alt": {Provider: local.New(local.Options{}), ID: "local-alt"}},
		RequestTimeout: 10 * time.Second, Logger: zerolog.Nop()}
	rt, err := ctxinf.Open(context.Background(), ctxinf.Options{Config: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// tuiShape is what a backend answered in the test, without what differs
// between two runtimes (ids, times): the two backends must agree on it.
type tuiShape struct {
	Names    [2]string
	Updates  int
	Text     [2]uint64 // the first turn's text durable/displayed
	Pages    [][]string
	Steps    []string
	Pending  []uint64
	Hits     []string // source turn numbers
	Chunks   []string // turn 1's chunks: message, bytes, type, tokens, text
	Forked   []string
	Pins     []string
	Models   []string
	Selected string
	Cancel   string
	Context  []string
}

// One test body runs against both backends of the TUI and the chat: the
// embedded runtime, and the API of a server over one. Each answers every
// method alike.
func TestTUIBackends(t *testing.T) {
	backends := []struct {
		name string
		open func(t *testing.T) tui.Backend
	}{
		{"local", func(t *testing.T) tui.Backend { return newEmbedded(tuiRuntime(t), "local", "local") }},
		{"remote", func(t *testing.T) tui.Backend {
			rt := tuiRuntime(t)
			s, err := server.New(rt.Runtime, server.OptionsOf(config.Default().Server))
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(s)
			t.Cleanup(ts.Close)
			return newRemote(client.New(ts.URL))
		}},
	}
	shapes := make([]tuiShape, len(backends))
	for i, b := range backends {
		t.Run(b.name, func(t *testing.T) { shapes[i] = testTUIBackend(t, b.open(t)) })
	}
	if !reflect.DeepEqual(shapes[0], shapes[1]) {
		t.Errorf("the backends answered differently:\nlocal  %+v\nremote %+v", shapes[0], shapes[1])
	}
}

func testTUIBackend(t *testing.T, be tui.Backend) tuiShape {
	ctx := context.Background()
	var shape tuiShape
	provider, model, err := be.Names(ctx)
	if err != nil || provider != "local" || model != "local" {
		t.Fatalf("Names() = %q, %q, %v; want local, local", provider, model, err)
	}
	shape.Names = [2]string{provider, model}
	main, err := be.CreateSession(ctx, "tui backend")
	if err != nil || main.Label != "main" {
		t.Fatalf("CreateSession() = %+v, %v", main, err)
	}
	if s, err := be.Session(ctx, main.Session); err != nil || s.ID != main.Session || s.Title != "tui backend" || s.ActiveBranch != main.ID {
		t.Fatalf("Session() = %+v, %v", s, err)
	}
	if s, ok, err := be.LatestSession(ctx); err != nil || !ok || s.ID != main.Session {
		t.Fatalf("LatestSession() = %+v, %v, %v", s, ok, err)
	}

	// A turn streams its text with the text's byte counters.
	var updates []tui.Update
	var streamed strings.Builder
	seq, last, err := be.Submit(ctx, main.ID, tuiFacts[0], func(u tui.Update) {
		streamed.WriteString(u.Delta)
		if !u.Done && u.Item == nil && u.TextDisplayed != uint64(streamed.Len()) {
			t.Errorf("update %d (%q): TextDisplayed = %d, want %d", len(updates), u.Delta, u.TextDisplayed, streamed.Len())
		}
		if u.TextDurable > u.TextDisplayed {
			t.Errorf("update %d: TextDurable %d > TextDisplayed %d", len(updates), u.TextDurable, u.TextDisplayed)
		}
		updates = append(updates, u)
	})
	if err != nil || seq != 1 || !last.Done || last.Phase != messages.PhaseResponseFinalized || streamed.Len() == 0 {
		t.Fatalf("Submit() = %d, %+v, %v (streamed %q)", seq, last, err, streamed.String())
	}
	if n := uint64(streamed.Len()); last.TextDisplayed != n || last.TextDurable != n {
		t.Fatalf("the last update: text durable/displayed %d/%d, want %d/%d", last.TextDurable, last.TextDisplayed, n, n)
	}
	if len(updates) < 3 {
		t.Fatalf("%d updates, want the reply streamed: %+v", len(updates), updates)
	}
	shape.Updates = len(updates)
	shape.Text = [2]uint64{last.TextDurable, last.TextDisplayed}
	for i, f := range tuiFacts[1:] {
		if seq, last, err := be.Submit(ctx, main.ID, f, func(tui.Update) {}); err != nil || seq != uint64(i+2) || last.Phase != messages.PhaseResponseFinalized {
			t.Fatalf("Submit(%q) = %d, %+v, %v", f, seq, last, err)
		}
	}
	turns := make([]messages.TurnID, len(tuiFacts)+1) // by number
	for n := 1; n <= len(tuiFacts); n++ {
		row, err := be.TurnAt(ctx, main.ID, uint64(n))
		if err != nil || row.Seq != uint64(n) {
			t.Fatalf("TurnAt(%d) = %+v, %v", n, row, err)
		}
		turns[n] = row.ID
	}

	// The history of 7 turns (14 messages) in pages of 5, newest first:
	// each message says its turn, the user's its text.
	var all []tui.Entry
	before := messages.NodeID{}
	for page := 0; ; page++ {
		if page == 3 {
			t.Fatalf("more than 3 pages of 5 for 14 messages")
		}
		es, next, err := be.History(ctx, main.ID, before, 5)
		if err != nil {
			t.Fatalf("History(page %d) = %v", page, err)
		}
		var roles []string
		for _, e := range es {
			roles = append(roles, fmt.Sprint(e.Role))
		}
		shape.Pages = append(shape.Pages, roles)
		all = append(es, all...)
		if next.IsZero() {
			break
		}
		before = next
	}
	if len(shape.Pages) != 3 || len(all) != 2*len(tuiFacts) {
		t.Fatalf("History: pages %v, %d messages; want 3 pages, 14 messages", shape.Pages, len(all))
	}
	for i, e := range all {
		n := i/2 + 1
		wantRole := messages.RoleUser
		if i%2 == 1 {
			wantRole = messages.RoleAssistant
		}
		if e.Role != wantRole || e.Turn != turns[n] || i > 0 && e.Depth != all[i-1].Depth+1 {
			t.Errorf("message %d: %s of turn %s at depth %d; want %s of turn %d (%s)", i, e.Role, e.Turn, e.Depth, wantRole, n, turns[n])
		}
		if wantRole == messages.RoleUser && e.Text != tuiFacts[n-1] || wantRole == messages.RoleAssistant && e.Text == "" {
			t.Errorf("message %d: text %q", i, e.Text)
		}
		if e.Partial != nil || e.Items != nil {
			t.Errorf("message %d: partial %v, items %v", i, e.Partial, e.Items)
		}
	}
	if all[1].Text != streamed.String() {
		t.Errorf("the first reply is %q in the history, %q as streamed", all[1].Text, streamed.String())
	}

	// A turn with its steps; no recovered output.
	ti, err := be.Turn(ctx, main.ID, turns[1])
	if err != nil || ti.ID != turns[1] || ti.Seq != 1 || len(ti.Steps) != 1 || ti.Chunks == nil {
		t.Fatalf("Turn(1) = %+v, %v (chunks are [] before the turn is indexed, never nil)", ti, err)
	}
	for _, st := range ti.Steps {
		shape.Steps = append(shape.Steps, fmt.Sprintf("%d %s/%s %s", st.Index, st.Provider, st.Model, st.Outcome.Kind))
		if st.Durable == 0 || st.Durable != st.Displayed {
			t.Errorf("step %d: journal durable/displayed %d/%d", st.Index, st.Durable, st.Displayed)
		}
	}
	if shape.Steps[0] != "0 local/local completed" {
		t.Errorf("Turn(1) steps %v", shape.Steps)
	}
	if _, ok, err := be.Recovered(ctx, main.ID, turns[1]); ok || err != nil {
		t.Errorf("Recovered(1) = %v, %v; want none", ok, err)
	}

	// Pending turns (the summary keeps 6 messages verbatim: at least 3
	// turns), then committed now: every turn is folded and indexed.
	pending, err := be.Pending(ctx, main.ID)
	if err != nil || len(pending) < 3 {
		t.Fatalf("Pending() = %+v, %v; want at least 3 turns", pending, err)
	}
	for i, p := range pending {
		if p.Turn != turns[p.Seq] || i > 0 && p.Seq != pending[i-1].Seq+1 || p.Reply.IsZero() {
			t.Errorf("pending turn %d: %+v", i, p)
		}
	}
	if pending[len(pending)-1].Seq != uint64(len(tuiFacts)) {
		t.Errorf("the newest turn is not pending: %+v", pending)
	}
	if err := be.CommitPending(ctx, main.ID); err != nil {
		t.Fatalf("CommitPending() = %v", err)
	}
	info := waitInfo(t, be, main.ID, func(i api.BranchInfo) bool {
		return i.Pending == 0 && i.Indexed == uint64(len(tuiFacts))
	})
	if info.Branch.ID != main.ID || info.TurnSeq != uint64(len(tuiFacts)) || info.InFlight != nil || info.Tip.IsZero() {
		t.Errorf("Info() = %+v", info)
	}
	if pending, err := be.Pending(ctx, main.ID); err != nil || len(pending) != 0 {
		t.Errorf("Pending() after the commit = %+v, %v", pending, err)
	}
	shape.Pending = []uint64{uint64(info.Pending), info.Indexed}

	// The chunks an indexed turn was cut into (the TUI's chunk browser),
	// in reading order: the user's message first, at its byte offsets.
	ti, err = be.Turn(ctx, main.ID, turns[1])
	if err != nil || len(ti.Chunks) == 0 {
		t.Fatalf("Turn(1) once indexed: %d chunks, %v; want some", len(ti.Chunks), err)
	}
	if c := ti.Chunks[0]; c.Node != turns[1] || c.Seq != 1 || c.End > len(tuiFacts[0]) || tuiFacts[0][c.Start:c.End] != c.Text {
		t.Errorf("Turn(1)'s first chunk %+v: want the user's message's text at its offsets", c)
	}
	for _, c := range ti.Chunks {
		from := "user"
		if c.Node == ti.Reply {
			from = "reply"
		} else if c.Node != turns[1] {
			t.Errorf("chunk %+v: from neither the turn's message nor its reply", c)
		}
		if c.ID.IsZero() || c.TokenEst <= 0 || c.Summary == "" {
			t.Errorf("chunk %+v: want an id, tokens and a summary", c)
		}
		shape.Chunks = append(shape.Chunks, fmt.Sprintf("%s %d-%d %s %d %q", from, c.Start, c.End, c.Type, c.TokenEst, c.Text))
	}

	// Manual retrieval: scored hits, the turn that holds the answer first.
	hits, err := be.Search(ctx, main.ID, "which host runs the staging database", 3)
	if err != nil || len(hits) == 0 || len(hits) > 3 {
		t.Fatalf("Search() = %+v, %v; want 1 to 3 hits", hits, err)
	}
	for _, h := range hits {
		n := slices.Index(turns, h.Chunk.SourceTurn)
		if n < 1 || h.Score <= 0 || h.Chunk.Text == "" {
			t.Errorf("hit %+v: source turn %d", h, n)
		}
		// (Scores hold a recency boost: the two runtimes' times differ.)
		shape.Hits = append(shape.Hits, fmt.Sprintf("turn %d", n))
	}
	if hits[0].Chunk.SourceTurn != turns[1] {
		t.Errorf("the best hit is not turn 1's: %v", shape.Hits)
	}

	// The context debug view: of a turn that retrieved the first turn,
	// of turn 1, and of a next turn.
	if seq, _, err := be.Submit(ctx, main.ID, "Remind me: which host runs the staging database?", func(tui.Update) {}); err != nil || seq != 8 {
		t.Fatalf("Submit(8) = %d, %v", seq, err)
	}
	if row, err := be.TurnAt(ctx, main.ID, 8); err != nil {
		t.Fatalf("TurnAt(8) = %v", err)
	} else if ti, err := be.Turn(ctx, main.ID, row.ID); err != nil || ti.Phase == messages.PhaseResponseFinalized && len(ti.Chunks) != 0 {
		t.Errorf("Turn(8), pending: %d chunks, %v; want none before it is indexed", len(ti.Chunks), err)
	}
	d, err := be.Context(ctx, main.ID, 8, "")
	if err != nil || d.Turn.IsZero() || !d.Matches || len(d.Retrieved) == 0 {
		t.Fatalf("Context(8) = turn %s, matches %v, retrieved %+v, %v", d.Turn, d.Matches, d.Retrieved, err)
	}
	if d.Retrieved[0].Chunk != hits[0].Chunk.ID || len(d.Context.Retrieved) == 0 || d.Context.Retrieved[0].SourceTurn != turns[1] {
		t.Errorf("Context(8) offered %+v first and packed %+v; want turn 1's chunk %s", d.Retrieved[0], d.Context.Retrieved, hits[0].Chunk.ID)
	}
	if d.Retrieved[0].Score <= 0 {
		t.Errorf("Context(8) offered %+v first", d.Retrieved[0])
	}
	shape.Context = append(shape.Context, fmt.Sprintf("8: %d offered, %d packed", len(d.Retrieved), len(d.Context.Retrieved)))
	d, err = be.Context(ctx, main.ID, 1, "")
	if err != nil || d.Turn != turns[1] || d.Provider != "local" || !d.Matches || len(d.Retrieved) != 0 {
		t.Fatalf("Context(1) = %+v, %v", d, err)
	}
	shape.Context = append(shape.Context, fmt.Sprintf("1: %d retrieved, %d window", len(d.Retrieved), len(d.Context.Window)))
	d, err = be.Context(ctx, main.ID, 0, "Where are invoices archived?")
	if err != nil || !d.Turn.IsZero() || d.RebuiltHash == "" {
		t.Fatalf("Context(next) = %+v, %v", d, err)
	}
	if _, err := be.Context(ctx, main.ID, 99, ""); err == nil {
		t.Errorf("Context(99) of a branch of 8 turns: no error")
	}

	// Fork at turn 3 (a rollback): the branch's history ends there.
	fork, err := be.Fork(ctx, main.ID, turns[3], "retry")
	if err != nil || fork.Parent != main.ID || fork.Label != "retry" || fork.Session != main.Session {
		t.Fatalf("Fork(3) = %+v, %v", fork, err)
	}
	if row, err := be.BranchRow(ctx, fork.ID); err != nil || row != fork {
		t.Fatalf("BranchRow(fork) = %+v, %v; want %+v", row, err, fork)
	}
	bs, err := be.Branches(ctx, main.Session)
	if err != nil || len(bs) != 2 {
		t.Fatalf("Branches() = %+v, %v", bs, err)
	}
	for _, b := range bs {
		shape.Forked = append(shape.Forked, b.Label)
	}
	slices.Sort(shape.Forked)
	es, next, err := be.History(ctx, fork.ID, messages.NodeID{}, 50)
	if err != nil || len(es) != 6 || !next.IsZero() || es[5].Turn != turns[3] || es[5].Role != messages.RoleAssistant {
		t.Fatalf("History(fork) = %d messages, %v", len(es), err)
	}
	shape.Forked = append(shape.Forked, fmt.Sprintf("%d messages", len(es)))

	// Pins: add, edit, remove.
	p1, err := be.Pin(ctx, main.ID, "Answer in French.")
	if err != nil || p1.ID == 0 || p1.Fact != "Answer in French." {
		t.Fatalf("Pin() = %+v, %v", p1, err)
	}
	p2, err := be.Pin(ctx, main.ID, "Use tabs.")
	if err != nil || p2.ID == p1.ID {
		t.Fatalf("Pin() = %+v, %v", p2, err)
	}
	if e, err := be.EditPin(ctx, main.ID, p2.ID, "Use spaces."); err != nil || e.ID != p2.ID || e.Fact != "Use spaces." {
		t.Fatalf("EditPin() = %+v, %v", e, err)
	}
	if err := be.Unpin(ctx, main.ID, p1.ID); err != nil {
		t.Fatalf("Unpin() = %v", err)
	}
	if err := be.Unpin(ctx, main.ID, 99); err == nil {
		t.Errorf("Unpin(99): no error")
	}
	pins, err := be.Pins(ctx, main.ID)
	if err != nil || len(pins) != 1 || pins[0].ID != p2.ID || pins[0].Fact != "Use spaces." {
		t.Fatalf("Pins() = %+v, %v", pins, err)
	}
	for _, p := range pins {
		shape.Pins = append(shape.Pins, fmt.Sprintf("%d %s", p.ID, p.Fact))
	}

	// Models: the names, then one selected.
	if shape.Models, err = be.ModelNames(ctx); err != nil || !slices.Equal(shape.Models, []string{"alt"}) {
		t.Fatalf("ModelNames() = %v, %v", shape.Models, err)
	}
	if err := be.SelectModel(ctx, main.ID, "alt"); err != nil {
		t.Fatalf("SelectModel(alt) = %v", err)
	}
	if err := be.SelectModel(ctx, main.ID, "nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("SelectModel(nope) = %v, want an error naming it", err)
	}
	if info, err := be.Info(ctx, main.ID); err != nil || info.Model != "alt" {
		t.Fatalf("Info() after SelectModel = %+v, %v", info, err)
	}
	shape.Selected = "alt"

	// Cancel with no turn in flight: the API's error.
	err = be.Cancel(ctx, main.ID)
	if err == nil || !strings.Contains(err.Error(), "no turn in flight") {
		t.Fatalf("Cancel() of an idle branch = %v, want no turn in flight", err)
	}
	shape.Cancel = "no turn in flight"

	if del, err := be.DeleteBranch(ctx, fork.ID); err != nil || len(del.Branches) != 1 || del.Branches[0] != fork.ID {
		t.Fatalf("DeleteBranch(fork) = %+v, %v", del, err)
	}
	if bs, err := be.Branches(ctx, main.Session); err != nil || len(bs) != 1 {
		t.Fatalf("Branches() after the delete = %+v, %v", bs, err)
	}
	return shape
}

// waitInfo polls the branch's live state until ok says it is reached.
func waitInfo(t *testing.T, be tui.Backend, branch messages.BranchID, ok func(api.BranchInfo) bool) api.BranchInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := be.Info(context.Background(), branch)
		if err != nil {
			t.Fatal(err)
		}
		if ok(info) {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("the branch did not get there: %+v", info)
		}
		time.Sleep(10 * time.Millisecond) // a poll interval: nothing waits on it
	}
}

// A reply that ran tools lists its calls and outputs as the transcript
// items the TUI shows, in order; a message without tools lists none.
func TestHistoryEntryItems(t *testing.T) {
	node := messages.NewID[messages.NodeID](time.Unix(1, 0))
	reply := messages.NewMessage(messages.RoleAssistant,
		messages.Text{Text: "Looking."},
		messages.ToolUse{ToolUseID: "a", Name: "grep", Input: []byte(`{"q":"x"}`)},
		messages.ToolResult{ToolUseID: "a", Content: messages.Blocks{messages.Text{Text: "match:x"}}},
		messages.ToolResult{ToolUseID: "b", IsError: true, Content: messages.Blocks{messages.Text{Text: "timeout"}}},
		messages.Text{Text: "Found it."})
	partial := "cut"
	e := historyEntry(node, 4, reply, &partial)
	want := []messages.TranscriptItem{
		messages.ToolCall{CallID: "a", Name: "grep", Arguments: []byte(`{"q":"x"}`)},
		messages.ToolOutput{CallID: "a", Output: []byte(`"match:x"`)},
		messages.ToolOutput{CallID: "b", Output: []byte(`"timeout"`), IsError: true},
	}
	if e.Turn != node || e.Depth != 4 || e.Role != messages.RoleAssistant || e.Text != reply.RenderedText ||
		e.Partial != &partial || !reflect.DeepEqual(e.Items, want) {
		t.Fatalf("historyEntry() = %+v\nwant items %+v", e, want)
	}
	if e := historyEntry(node, 3, messages.NewMessage(messages.RoleUser, messages.Text{Text: "hi"}), nil); e.Items != nil || e.Text != "hi" {
		t.Fatalf("historyEntry(user) = %+v", e)
	}
}
