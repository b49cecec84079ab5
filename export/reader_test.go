package export

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// readAll reads the export in data with o: its session line, its items
// and the active branch's index.
func readAll(data []byte, o ReadOptions) (SessionLine, []Item, int, error) {
	x := NewReader(bytes.NewReader(data), o)
	head, err := x.Session()
	if err != nil {
		return head, nil, 0, err
	}
	var items []Item
	for {
		it, err := x.Next()
		if errors.Is(err, io.EOF) {
			return head, items, x.ActiveBranch(), nil
		}
		if err != nil {
			return head, items, 0, err
		}
		items = append(items, it)
	}
}

// What a Writer writes, a Reader reads back: the same items (but the
// branches' ids, which an export does not hold) and the active branch.
func TestReaderReadsWhatWriterWrites(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	main, fork := messages.BranchID{1}, messages.BranchID{2}
	user := messages.NewMessage(messages.RoleUser, messages.Text{Text: "q"})
	reply := messages.NewMessage(messages.RoleAssistant, messages.Text{Text: "a"})
	said := user // who said it and when: an imported conversation's
	said.Speaker, said.Time = "Caroline", time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC)
	items := []Item{
		{Branch: &Branch{ID: main, Label: "main", Created: at, Parent: -1}},
		{Turn: &Turn{Seq: 1, User: said, Reply: reply}},
		{Turn: &Turn{Seq: 2, User: user, Failed: true, Code: "cancelled", Reason: "stop"}},
		{State: &State{Seq: 1, Summary: "s", Pinned: []string{"p"}, Turns: []uint64{1}}},
		{Head: &Head{Pinned: []string{"p"}, Model: "m"}},
		{Branch: &Branch{ID: fork, Label: "alt", Created: at, Parent: 0, ForkAtDepth: 2, TipDepth: 2, ForkSeq: 1,
			Base: State{Seq: 1, Summary: "s"}, Carried: []uint64{2}}},
		{Head: &Head{}},
	}
	var buf bytes.Buffer
	w := NewWriter(&buf, "t", at, fork)
	for _, it := range items {
		if err := w.Write(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	head, got, active, err := readAll(buf.Bytes(), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if head.Title != "t" || !head.Created.Equal(at) || head.Format != Format {
		t.Errorf("Session() = %+v, want title t, created %v, format %d", head, at, Format)
	}
	if active != 1 {
		t.Errorf("ActiveBranch() = %d, want 1", active)
	}
	for _, it := range items {
		if it.Branch != nil {
			it.Branch.ID = messages.BranchID{}
		}
	}
	if len(got) != len(items) {
		t.Fatalf("read %d items, want %d", len(got), len(items))
	}
	for i := range items {
		if g, w := fmt.Sprintf("%+v", deref(got[i])), fmt.Sprintf("%+v", deref(items[i])); g != w {
			t.Errorf("item %d = %s, want %s", i, g, w)
		}
	}
}

// deref is the one value it holds.
func deref(it Item) any {
	switch {
	case it.Branch != nil:
		return *it.Branch
	case it.Turn != nil:
		return *it.Turn
	case it.State != nil:
		return *it.State
	case it.Head != nil:
		return *it.Head
	}
	return nil
}

// withEnd returns lines (each ending in a newline) and their end line.
func withEnd(lines string, branches, turns, states int) string {
	sum := sha256.Sum256([]byte(lines))
	return lines + fmt.Sprintf(`{"type":"end","branches":%d,"turns":%d,"states":%d,"active_branch":0,"sha256":%q}`+"\n",
		branches, turns, states, hex.EncodeToString(sum[:]))
}

func turnLine(seq int, user, reply string) string {
	u, _ := json.Marshal(messages.NewMessage(messages.RoleUser, messages.Text{Text: user}))
	r, _ := json.Marshal(messages.NewMessage(messages.RoleAssistant, messages.Text{Text: reply}))
	return fmt.Sprintf(`{"type":"turn","seq":%d,"user":%s,"reply":%s}`+"\n", seq, u, r)
}

const (
	sessionLine = `{"type":"session","format":2,"title":"t","created":"2025-01-02T03:04:05Z"}` + "\n"
	branchLine  = `{"type":"branch","label":"main","created":"2025-01-02T03:04:05Z","parent":-1,"fork_at_depth":0,"tip_depth":0,"fork_seq":0,"base":{"seq":0,"summary":""}}` + "\n"
	headLine    = `{"type":"head"}` + "\n"
)

// A Reader refuses an export that is cut short, changed, out of order,
// or over the limits it is given, naming the line and what is wrong; a
// line over MaxLineBytes is a LineTooLongError.
func TestReaderRefusesBadExports(t *testing.T) {
	t.Parallel()
	o := ReadOptions{MaxLineBytes: 4 << 10, MaxTitleBytes: 8, MaxLabelBytes: 8, MaxPinBytes: 16}
	good := sessionLine + branchLine + turnLine(1, "q1", "a1") + turnLine(2, "q2", "a2") + headLine
	if _, items, _, err := readAll([]byte(withEnd(good, 1, 2, 0)), o); err != nil || len(items) != 4 {
		t.Fatalf("the good export: %d items, %v; want 4, nil", len(items), err)
	}
	for _, c := range []struct{ name, body, want string }{
		{"empty", "", "the export is empty"},
		{"not a session", strings.Replace(withEnd(good, 1, 2, 0), `"type":"session"`, `"type":"branch"`, 1),
			`line 1: type "branch": want session`},
		{"title", strings.Replace(withEnd(good, 1, 2, 0), `"title":"t"`, `"title":"a long title"`, 1), "line 1: title: 12 bytes, limit 8"},
		{"format", strings.Replace(withEnd(good, 1, 2, 0), `"format":2`, `"format":3`, 1), "line 1: format 3: want 2"},
		{"cut short", good, "the export ends at line 5 without its end line"},
		{"changed", strings.Replace(withEnd(good, 1, 2, 0), "a2", "b2", 1), "line 6: sha256"},
		{"counts", withEnd(good, 1, 3, 0), "line 6: end: 1 branches, 3 turns and 0 states, the export has 1, 2 and 0"},
		{"no branch first", withEnd(sessionLine+turnLine(1, "q", "a"), 0, 1, 0), "line 2: type turn: want a branch line first"},
		{"no head", withEnd(sessionLine+branchLine+turnLine(1, "q", "a"), 1, 1, 0), "line 4: end: the last branch has no head line"},
		{"no head before a branch", withEnd(sessionLine+branchLine+branchLine, 2, 0, 0), "line 3: branch: the branch before it has no head line"},
		{"label", withEnd(sessionLine+strings.Replace(branchLine, `"label":"main"`, `"label":"a long label"`, 1)+headLine, 1, 0, 0),
			"line 2: label: 12 bytes, limit 8"},
		{"pin", withEnd(sessionLine+branchLine+`{"type":"head","pinned":["a fact too long to pin"]}`+"\n", 1, 0, 0),
			"line 3: pinned[0]: 22 bytes, limit 16"},
		{"memory tools", withEnd(sessionLine+branchLine+`{"type":"head","memory_tools":"always"}`+"\n", 1, 0, 0),
			`line 3: head: messages: unknown value: memory tools setting "always", want default, on or off`},
		{"unknown field", withEnd(sessionLine+branchLine+`{"type":"head","colour":"red"}`+"\n", 1, 0, 0),
			`line 3: head: json: unknown field "colour"`},
		{"reply and failed", withEnd(sessionLine+branchLine+strings.Replace(turnLine(1, "q", "a"), `"reply"`, `"failed":{"reason":"r"},"reply"`, 1)+headLine, 1, 1, 0),
			"line 3: a turn has a reply or failed, one of them"},
		{"unknown type", withEnd(sessionLine+branchLine+`{"type":"note"}`+"\n", 1, 0, 0), `line 3: type "note": want branch, turn, state, head or end`},
		{"after the end", withEnd(good, 1, 2, 0) + headLine, "line 7: a line after the end line"},
		{"time", withEnd(sessionLine+branchLine+strings.Replace(turnLine(1, "q", "a"), `"rendered_text":"q"`, `"rendered_text":"q","time":"8 May 2023"`, 1)+headLine, 1, 1, 0),
			`line 3: turn: messages: invalid message: field "time" is invalid: "8 May 2023" is not an RFC 3339 time`},
		{"speaker", withEnd(sessionLine+branchLine+strings.Replace(turnLine(1, "q", "a"), `"rendered_text":"a"`, `"rendered_text":"a","speaker":"`+strings.Repeat("x", 300)+`"`, 1)+headLine, 1, 1, 0),
			`line 3: turn: messages: invalid message: field "speaker" is invalid: 300 bytes, limit 256`},
	} {
		_, _, _, err := readAll([]byte(c.body), o)
		var bad *InvalidError
		if !errors.As(err, &bad) || !strings.Contains(bad.Message, c.want) {
			t.Errorf("%s: %v, want an InvalidError saying %q", c.name, err, c.want)
		}
	}
	long := withEnd(sessionLine+branchLine+turnLine(1, "q", strings.Repeat("y", 5<<10))+headLine, 1, 1, 0)
	_, _, _, err := readAll([]byte(long), o)
	if tl := (*LineTooLongError)(nil); !errors.As(err, &tl) || tl.Line != 3 || tl.Limit != o.MaxLineBytes {
		t.Errorf("a line over the limit: %v, want a LineTooLongError of line 3, limit %d", err, o.MaxLineBytes)
	}
}

// JSONProblem words what is wrong with a line's JSON.
func TestReaderWordsJSONProblems(t *testing.T) {
	t.Parallel()
	o := ReadOptions{JSONProblem: func(err error, v any) string { return fmt.Sprintf("bad %T", v) }}
	_, _, _, err := readAll([]byte(sessionLine+branchLine+`{"type":"head","pinned":"one"}`+"\n"), o)
	if bad := (*InvalidError)(nil); !errors.As(err, &bad) || bad.Message != "line 3: head: bad *export.HeadLine" {
		t.Errorf("a head line with a string for pinned: %v, want the message of JSONProblem", err)
	}
}

// Format 1 reads as one branch, main: a turn per user message with the
// assistant messages after it as its reply, then the head.
func TestReaderReadsFormat1(t *testing.T) {
	t.Parallel()
	line := func(v V1Line) string {
		b, _ := json.Marshal(v)
		return string(b) + "\n"
	}
	msg := func(role messages.Role, text string) V1Line {
		m := messages.NewMessage(role, messages.Text{Text: text})
		return V1Line{Type: "message", Message: &m}
	}
	session := line(V1Line{Type: "session", Title: "old"})
	data := session + line(msg(messages.RoleUser, "q1")) + line(msg(messages.RoleAssistant, "a")) +
		line(msg(messages.RoleAssistant, "b")) + "\n" + line(msg(messages.RoleUser, "q2"))
	head, items, active, err := readAll([]byte(data), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if head.Format != 0 || head.Title != "old" || active != 0 {
		t.Errorf("Session() = %+v, active %d; want format 0 (1), title old, active 0", head, active)
	}
	var got []string
	for _, it := range items {
		switch {
		case it.Branch != nil:
			got = append(got, fmt.Sprintf("branch %s %d", it.Branch.Label, it.Branch.Parent))
		case it.Turn != nil:
			got = append(got, fmt.Sprintf("turn %d %s/%s", it.Turn.Seq, it.Turn.User.RenderedText, it.Turn.Reply.RenderedText))
		case it.Head != nil:
			got = append(got, "head")
		default:
			got = append(got, "other")
		}
	}
	if want := []string{"branch main -1", "turn 1 q1/ab", "turn 2 q2/", "head"}; !reflect.DeepEqual(got, want) {
		t.Errorf("items %q, want %q", got, want)
	}
	for _, c := range []struct{ name, body, want string }{
		{"assistant first", session + line(msg(messages.RoleAssistant, "a")), "line 2: an assistant message before any user message"},
		{"no user message", session, "no user message to import"},
		{"other line", session + `{"type":"note"}` + "\n", `line 2: type "note": want message`},
	} {
		_, _, _, err := readAll([]byte(c.body), ReadOptions{})
		if bad := (*InvalidError)(nil); !errors.As(err, &bad) || !strings.Contains(bad.Message, c.want) {
			t.Errorf("%s: %v, want an InvalidError saying %q", c.name, err, c.want)
		}
	}
}
