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
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/export"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
)

// codeword is the rare word of turn i of a generated export.
func codeword(i int) string { return fmt.Sprintf("zebra%dquartz", i) }

// generatedExport is an export of n turns, each holding its codeword:
// format 2 with a state folding every `every` turns (the newest left
// pending), or format 1 (messages only).
func generatedExport(n, format, every int) []byte {
	var buf bytes.Buffer
	sum := sha256.New()
	put := func(v any) {
		line, _ := json.Marshal(v)
		line = append(line, '\n')
		buf.Write(line)
		sum.Write(line)
	}
	user := func(i int) messages.Message {
		return messages.NewMessage(messages.RoleUser, messages.Text{Text: fmt.Sprintf("turn %d: remember the codeword %s", i, codeword(i))})
	}
	reply := func(i int) messages.Message {
		return messages.NewMessage(messages.RoleAssistant, messages.Text{Text: fmt.Sprintf("noted, turn %d", i)})
	}
	if format == 1 {
		put(export.V1Line{Type: "session", Title: "generated"})
		for i := 1; i <= n; i++ {
			u, r := user(i), reply(i)
			put(export.V1Line{Type: "message", Message: &u})
			put(export.V1Line{Type: "message", Message: &r})
		}
		return buf.Bytes()
	}
	put(export.SessionLine{Type: "session", Format: export.Format, Title: "generated"})
	put(export.BranchLine{Type: "branch", Label: "main", Parent: -1})
	var folded []uint64
	states := 0
	for i := 1; i <= n; i++ {
		u, r := user(i), reply(i)
		put(export.TurnLine{Type: "turn", Seq: uint64(i), User: &u, Reply: &r})
		if folded = append(folded, uint64(i)); len(folded) == every && n-i >= every {
			states++
			put(export.StateLine{Type: "state", StateFields: export.StateFields{Seq: uint64(states), Summary: fmt.Sprintf("summary %d", states), Turns: folded}})
			folded = nil
		}
	}
	put(export.HeadLine{Type: "head"})
	end, _ := json.Marshal(export.EndLine{Type: "end", Branches: 1, Turns: n, States: states, SHA256: hex.EncodeToString(sum.Sum(nil))})
	buf.Write(append(end, '\n'))
	return buf.Bytes()
}

// metric returns the value of the unlabelled metric name in /metrics.
func (ts *testServer) metric(t *testing.T, name string) string {
	t.Helper()
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	t.Fatalf("metrics lack %s", name)
	return ""
}

// An import indexes what it folds before it answers, batch by batch: at
// its answer, with no passivation and no wait, every folded turn is
// indexed, the index backlog is 0, a search finds the first turns, and
// the branch holds a bounded number of pending turns (format 1 has no
// states: the import folds all but the newest as it goes), so that the
// first turn after it has no backlog to wait on.
func TestImportIsIndexedWhenItAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		format, n      int
		folded, states int
	}{
		{"format 2", 2, 700, 695, 139},
		// 700 turns: 256 folded when 512 are pending; 444 left.
		{"format 1", 1, 700, importV1Pending, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Folds only when asked: nothing moves after the answer. A
			// batch of the import is one request to the branch: on a
			// loaded machine under -race, it takes more than the test
			// server's 10 s.
			ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
				c.Fold = &core.Policy{K: 1000, B: 1000}
				c.RequestTimeout = 2 * time.Minute
			})
			st, out, e := ts.importBody(t, generatedExport(tc.n, tc.format, 5))
			if st != 201 || out.Turns != tc.n || out.States != tc.states {
				t.Fatalf("import: %d %+v %+v, want 201 with %d turns and %d states", st, out, e, tc.n, tc.states)
			}
			b := out.Branch.ID
			info, err := ts.rt.Inspect(context.Background(), b)
			if err != nil {
				t.Fatal(err)
			}
			if info.Committed != uint64(tc.folded) || info.Indexed != info.Committed || info.Pending != tc.n-tc.folded {
				t.Errorf("at the answer: %d folded, %d indexed, %d pending; want %d folded and indexed, %d pending",
					info.Committed, info.Indexed, info.Pending, tc.folded, tc.n-tc.folded)
			}
			if got := ts.metric(t, "ctxinf_index_backlog_turns"); got != "0" {
				t.Errorf("ctxinf_index_backlog_turns = %s at the answer, want 0", got)
			}
			for _, i := range []int{1, 3, tc.folded} {
				var found struct{ Hits []client.Hit }
				if st := ts.call(t, "POST", "/v1/branches/"+b.String()+"/search", map[string]any{"query": codeword(i)}, &found); st != 200 ||
					len(found.Hits) == 0 || !strings.Contains(found.Hits[0].Chunk.Text, codeword(i)) {
					t.Errorf("search for turn %d's codeword at the answer: %d %+v", i, st, found.Hits)
				}
			}
			var turn client.TurnResult
			if st := ts.call(t, "POST", "/v1/branches/"+b.String()+"/turns", map[string]string{"text": "what was the codeword of turn 3?"}, &turn); st != 200 {
				t.Fatalf("a turn after the import: %d %+v", st, turn)
			}
			if got := ts.metric(t, "ctxinf_index_backlog_turns"); got != "0" {
				t.Errorf("ctxinf_index_backlog_turns = %s after a turn, want 0", got)
			}
		})
	}
}

// An import that fails after storing folded turns leaves no backlog
// counted: its branch is dropped.
func TestFailedImportLeavesNoBacklog(t *testing.T) {
	t.Parallel()
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.Fold = &core.Policy{K: 1000, B: 1000}
		c.RequestTimeout = 2 * time.Minute
	})
	body := generatedExport(600, 2, 5)
	body = append(body[:bytes.LastIndex(body[:len(body)-1], []byte("\n"))+1], []byte(`{"type":"end","branches":9}`+"\n")...)
	if st, _, e := ts.importBody(t, body); st != 400 || !strings.Contains(e.Error.Message, "sha256") {
		t.Fatalf("import with a wrong end line: %d %+v, want 400", st, e)
	}
	if got := ts.metric(t, "ctxinf_index_backlog_turns"); got != "0" {
		t.Errorf("ctxinf_index_backlog_turns = %s after a failed import, want 0", got)
	}
}
