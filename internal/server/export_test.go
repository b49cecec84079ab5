package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers/local"
)

// exportServer is a test server that folds only when asked (CommitPending),
// with a context window small enough for a turn to fail.
func exportServer(t *testing.T, opts Options) *testServer {
	return newTestServerWith(t, opts, 0, func(c *actors.Config) {
		c.Fold = &core.Policy{K: 1000, B: 1000}
		c.Provider = local.New(local.Options{ContextLimit: 3000})
		c.MaxOutputTokens, c.SafetyMargin = 200, 10
	})
}

func (ts *testServer) export(t *testing.T, session messages.SessionID) []byte {
	t.Helper()
	resp, err := http.Get(ts.URL + "/v1/sessions/" + session.String() + "/export")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("export: %d %v: %s", resp.StatusCode, err, data)
	}
	return data
}

func (ts *testServer) importBody(t *testing.T, body []byte) (int, client.Imported, apiErr) {
	t.Helper()
	resp, err := http.Post(ts.URL+"/v1/sessions/import", "application/x-ndjson", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out client.Imported
	var e apiErr
	if resp.StatusCode == 201 {
		err = json.Unmarshal(data, &out)
	} else {
		err = json.Unmarshal(data, &e)
	}
	if err != nil {
		t.Fatalf("import: %d %s: %v", resp.StatusCode, data, err)
	}
	return resp.StatusCode, out, e
}

// send runs a turn on branch to its end and returns its final update.
func send(t *testing.T, rt *actors.Runtime, branch messages.BranchID, text string) actors.Update {
	t.Helper()
	s, err := rt.Submit(context.Background(), branch, text)
	if err != nil {
		t.Fatal(err)
	}
	_, last := s.Wait(nil)
	return last
}

// fold commits every pending turn of branch and waits until it has.
func fold(t *testing.T, rt *actors.Runtime, branch messages.BranchID) {
	t.Helper()
	ctx := context.Background()
	if err := rt.CommitPending(ctx, branch); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := rt.Inspect(ctx, branch)
		if err != nil {
			t.Fatal(err)
		}
		if info.Pending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("branch %s: %d turns still pending", branch, info.Pending)
		}
		time.Sleep(5 * time.Millisecond) // polling, with a deadline
	}
}

// turnID returns the id of branch's turn seq.
func turnID(t *testing.T, rt *actors.Runtime, branch messages.BranchID, seq uint64) messages.TurnID {
	t.Helper()
	rows, err := rt.DB().TurnRows(context.Background(), branch, seq, 1)
	if err != nil || len(rows) != 1 || rows[0].Seq != seq {
		t.Fatalf("turn %d of %s: %v %v", seq, branch, rows, err)
	}
	return rows[0].ID
}

// A session with forks at different turns (after a folded turn, at a
// head with pending turns, a fork of a fork), pins folded and not, and
// a failed turn exports, imports into a fresh server and exports again
// to the same bytes; the import has the same branches, fork points,
// states and pins.
func TestExportRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := exportServer(t, Options{})
	rt := src.rt
	sess, main, err := rt.CreateSession(ctx, "round trip")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"main one", "main two", "main three"} {
		send(t, rt, main.ID, q)
	}
	if _, err := rt.Pin(ctx, main.ID, "fact A"); err != nil {
		t.Fatal(err)
	}
	// Memory tools on for main and so its forks, which then set their own.
	if err := rt.SelectMemoryTools(ctx, main.ID, messages.MemoryToolsOn); err != nil {
		t.Fatal(err)
	}
	fold(t, rt, main.ID) // state 1 folds turns 1 to 3, pinned A
	if last := send(t, rt, main.ID, strings.Repeat("huge ", 4000)); last.Phase != messages.PhaseFailed {
		t.Fatalf("the huge turn ended %s, want failed", last.Phase)
	}
	send(t, rt, main.ID, "main five")
	send(t, rt, main.ID, "main six") // 5 and 6 pending
	if _, err := rt.Pin(ctx, main.ID, "fact B"); err != nil {
		t.Fatal(err) // pinned at the head, in no state yet
	}
	// After turn 2, folded with turn 3: state 0 carrying turns 1 and 2.
	f1, err := rt.Fork(ctx, main.ID, turnID(t, rt, main.ID, 2), "after two")
	if err != nil {
		t.Fatal(err)
	}
	// At the head: state 1 carrying 5 and 6, the failed turn before them.
	f2, err := rt.Fork(ctx, main.ID, messages.NodeID{}, "at head")
	if err != nil {
		t.Fatal(err)
	}
	for b, m := range map[messages.BranchID]messages.MemoryTools{f1.ID: messages.MemoryToolsDefault, f2.ID: messages.MemoryToolsOff} {
		if err := rt.SelectMemoryTools(ctx, b, m); err != nil {
			t.Fatal(err)
		}
	}
	send(t, rt, f1.ID, "fork one three")
	fold(t, rt, f1.ID)
	if _, err := rt.Pin(ctx, f1.ID, "fact C"); err != nil {
		t.Fatal(err)
	}
	send(t, rt, f1.ID, "fork one four")
	send(t, rt, f2.ID, "fork two seven")
	f3, err := rt.Fork(ctx, f2.ID, messages.NodeID{}, "fork of a fork")
	if err != nil {
		t.Fatal(err)
	}
	send(t, rt, f3.ID, "fork three eight")
	// Pins unpinned and edited come back so: fact B unpinned on the
	// fork at the head, fact A edited in place on the fork of it.
	if err := rt.Unpin(ctx, f2.ID, 2); err != nil {
		t.Fatal(err)
	}
	send(t, rt, f2.ID, "fork two nine")
	fold(t, rt, f2.ID)
	if _, err := rt.EditPin(ctx, f3.ID, 1, "fact A, edited"); err != nil {
		t.Fatal(err)
	}
	fold(t, rt, f3.ID)
	fold(t, rt, main.ID)

	before := src.export(t, sess.ID)
	for _, want := range []string{`"type":"branch"`, `"carried":[1,2]`, `"carried":[5,6]`, `"failed":{"code":"context_too_large"`,
		`"pinned":["fact A","fact B"]`, `{"type":"head","pinned":["fact C"]}`, `"label":"fork of a fork"`, `"pinned":["fact A, edited","fact B"]`, `"pinned":["fact A"]`, `"memory_tools":"on"}`, `"memory_tools":"off"}`} {
		if !bytes.Contains(before, []byte(want)) {
			t.Errorf("the export has no %s:\n%s", want, before)
		}
	}
	dst := exportServer(t, Options{})
	st, imp, e := dst.importBody(t, before)
	if st != 201 {
		t.Fatalf("import: %d %+v", st, e)
	}
	if imp.Branches != 4 || imp.Turns != 11 || imp.Session.Title != "round trip" || imp.Branch.Label != "main" {
		t.Errorf("imported %+v, want 4 branches and 11 turns of session %q", imp, "round trip")
	}
	after := dst.export(t, imp.Session.ID)
	if !bytes.Equal(before, after) {
		t.Errorf("export, import, export: the exports differ\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// The imported branches work: a fork's next turn sees its pins.
	bs, err := dst.rt.DB().Branches(ctx, imp.Session.ID)
	if err != nil || len(bs) != 4 {
		t.Fatalf("imported branches: %v %v", bs, err)
	}
	// Each imported branch's next context holds what the exported one's
	// does: a fork's verbatim window is its parent's at the fork point.
	srcs, err := rt.DB().Branches(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	next := func(r *actors.Runtime, b messages.BranchID) (window, pending []string) {
		d, err := r.DebugNextContext(ctx, b, "next?")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range d.Context.Window {
			window = append(window, m.RenderedText)
		}
		for _, m := range d.Context.Pending {
			pending = append(pending, m.RenderedText)
		}
		return window, pending
	}
	for _, b := range bs {
		i := slices.IndexFunc(srcs, func(s persistence.BranchRow) bool { return s.Label == b.Label })
		if i < 0 {
			t.Fatalf("imported branch %q is not in the source", b.Label)
		}
		sw, sp := next(rt, srcs[i].ID)
		dw, dp := next(dst.rt, b.ID)
		if !slices.Equal(sw, dw) || !slices.Equal(sp, dp) {
			t.Errorf("branch %q: imported window %q, pending %q; exported %q, %q", b.Label, dw, dp, sw, sp)
		}
		if !b.Parent.IsZero() && len(dw) == 0 {
			t.Errorf("fork %q: no verbatim window", b.Label)
		}
	}
	for _, b := range bs {
		if last := send(t, dst.rt, b.ID, "and now?"); last.Phase != messages.PhaseResponseFinalized {
			t.Errorf("branch %s (%s): a new turn ended %s", b.ID, b.Label, last.Phase)
		}
	}
}

// withEnd returns lines (each ending in a newline) and their end line.
func withEnd(lines string, branches, turns, states int) []byte {
	sum := sha256.Sum256([]byte(lines))
	return fmt.Appendf([]byte(lines), `{"type":"end","branches":%d,"turns":%d,"states":%d,"active_branch":0,"sha256":%q}`+"\n",
		branches, turns, states, hex.EncodeToString(sum[:]))
}

func turnLine(seq int, user, reply string) string {
	u, _ := json.Marshal(messages.NewMessage(messages.RoleUser, messages.Text{Text: user}))
	r, _ := json.Marshal(messages.NewMessage(messages.RoleAssistant, messages.Text{Text: reply}))
	return fmt.Sprintf(`{"type":"turn","seq":%d,"user":%s,"reply":%s}`+"\n", seq, u, r)
}

const exportHeader = `{"type":"session","format":2,"title":"t","created":"2025-01-02T03:04:05Z"}` + "\n" +
	`{"type":"branch","label":"main","created":"2025-01-02T03:04:05Z","parent":-1,"fork_at_depth":0,"tip_depth":0,"fork_seq":0,"base":{"seq":0,"summary":""}}` + "\n"

// An import is checked as the requests it stands for are, and one that
// fails, or is cut short, leaves no session.
func TestImportRefusesBadExports(t *testing.T) {
	t.Parallel()
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.Store.Limits.MaxPayloadBytes = 16 << 10
	})
	long := strings.Repeat("t", MaxTitleBytes+1)
	good := exportHeader + turnLine(1, "q1", "a1") + turnLine(2, "q2", "a2") + `{"type":"head"}` + "\n"
	for _, c := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"title", string(withEnd(strings.Replace(good, `"title":"t"`, `"title":"`+long+`"`, 1), 1, 2, 0)), 400,
			fmt.Sprintf("title: %d bytes, limit %d", MaxTitleBytes+1, MaxTitleBytes)},
		{"cut short", good, 400, "without its end line"},
		{"changed", strings.Replace(string(withEnd(good, 1, 2, 0)), "a2", "b2", 1), 400, "sha256"},
		{"counts", string(withEnd(good, 1, 3, 0)), 400, "3 turns"},
		{"seq gap", string(withEnd(exportHeader+turnLine(1, "q1", "a1")+turnLine(3, "q3", "a3")+`{"type":"head"}`+"\n", 1, 2, 0)), 400,
			"turn 3: seq 3, want 2"},
		{"role", string(withEnd(strings.Replace(good, `"role":"assistant"`, `"role":"user"`, 1), 1, 2, 0)), 400, "reply: role user"},
		{"state", string(withEnd(strings.Replace(good, `{"type":"head"}`,
			`{"type":"state","seq":1,"summary":"s","turns":[2]}`+"\n"+`{"type":"head"}`, 1), 1, 2, 1)), 400, "turns[0]: 2 is not the next pending turn"},
		{"unknown field", string(withEnd(strings.Replace(good, `{"type":"head"}`, `{"type":"head","colour":"red"}`, 1), 1, 2, 0)), 400,
			`colour: unknown field`},
		{"payload", string(withEnd(exportHeader+turnLine(1, strings.Repeat("x", 17<<10), "a")+`{"type":"head"}`+"\n", 1, 1, 0)), 413,
			"store.max_payload_bytes"},
		{"line", string(withEnd(exportHeader+turnLine(1, "q", strings.Repeat("y", 100<<10))+`{"type":"head"}`+"\n", 1, 1, 0)), 413,
			fmt.Sprintf("line 3: over the limit of %d bytes", 2*16<<10+64<<10)},
	} {
		st, _, e := ts.importBody(t, []byte(c.body))
		if st != c.status || !strings.Contains(e.Error.Message, c.want) {
			t.Errorf("%s: %d %q, want %d and a message with %q", c.name, st, e.Error.Message, c.status, c.want)
		}
	}
	ss, err := ts.rt.DB().Sessions(context.Background())
	if err != nil || len(ss) != 0 {
		t.Errorf("after failed imports, sessions %v (%v), want none", ss, err)
	}
	if imps, err := ts.rt.DB().Imports(context.Background()); err != nil || len(imps) != 0 {
		t.Errorf("after failed imports, imports under way %v (%v), want none", imps, err)
	}
	st, imp, e := ts.importBody(t, withEnd(good, 1, 2, 0))
	if st != 201 || imp.Turns != 2 || imp.Session.Title != "t" {
		t.Fatalf("good import: %d %+v %+v", st, imp, e)
	}
}

// An imported session is indexed as it is imported: its turns become
// indexed and searchable without its branch passivating, and a turn after
// the import answers.
func TestImportedSessionIsIndexedAtOnce(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	var created struct {
		Session persistence.SessionRow
		Branch  persistence.BranchRow
	}
	ts.call(t, "POST", "/v1/sessions", map[string]string{"title": "orig"}, &created)
	b := "/v1/branches/" + created.Branch.ID.String()
	texts := []string{"the staging host is blue-7", "the release train leaves on thursdays", "invoices go to kestrel",
		"the on-call rota starts with dana", "backups run at three"}
	for _, text := range texts {
		ts.call(t, "POST", b+"/turns", map[string]string{"text": text}, nil)
	}
	resp, err := http.Get(ts.URL + "/v1/sessions/" + created.Session.ID.String() + "/export")
	if err != nil {
		t.Fatal(err)
	}
	export, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var imported struct {
		Branch persistence.BranchRow
		Turns  int
	}
	if st := ts.call(t, "POST", "/v1/sessions/import", string(export), &imported); st != 201 || imported.Turns != len(texts) {
		t.Fatalf("import: %d %+v", st, imported)
	}
	ib := imported.Branch.ID
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := ts.rt.Inspect(context.Background(), ib)
		if err != nil {
			t.Fatal(err)
		}
		if info.Indexed == info.TurnSeq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the imported branch is not indexed: %d of %d turns", info.Indexed, info.TurnSeq)
		}
		time.Sleep(10 * time.Millisecond) // polling the branch's index counter
	}
	var found struct{ Hits []client.Hit }
	if st := ts.call(t, "POST", "/v1/branches/"+ib.String()+"/search", map[string]any{"query": "kestrel invoices"}, &found); st != 200 ||
		len(found.Hits) == 0 || !strings.Contains(found.Hits[0].Chunk.Text, "kestrel") {
		t.Fatalf("search of the imported branch: %d %+v", st, found.Hits)
	}
	var turn client.TurnResult
	if st := ts.call(t, "POST", "/v1/branches/"+ib.String()+"/turns", map[string]string{"text": "and then?"}, &turn); st != 200 {
		t.Fatalf("a turn after the import: %d %+v", st, turn)
	}
}
