package export

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// A Writer writes the session line, a line per item and the end line
// with the counts, the active branch's index and the SHA-256 of the
// lines before it.
func TestWriter(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	main := messages.BranchID{1}
	fork := messages.BranchID{2}
	var buf bytes.Buffer
	w := NewWriter(&buf, "t", at, fork)
	if w.Started() {
		t.Fatal("Started() = true before any item")
	}
	user := messages.NewMessage(messages.RoleUser, messages.Text{Text: "q"})
	reply := messages.NewMessage(messages.RoleAssistant, messages.Text{Text: "a"})
	for _, it := range []Item{
		{Branch: &Branch{ID: main, Label: "main", Created: at, Parent: -1}},
		{Turn: &Turn{Seq: 1, User: user, Reply: reply}},
		{Turn: &Turn{Seq: 2, User: user, Failed: true, Code: "cancelled", Reason: "stop"}},
		{State: &State{Seq: 1, Summary: "s", Turns: []uint64{1}}},
		{Head: &Head{Pinned: []string{"p"}, Model: "m", MemoryTools: messages.MemoryToolsOn}},
		{Branch: &Branch{ID: fork, Label: "alt", Created: at, Parent: 0, ForkAtDepth: 2, TipDepth: 2, ForkSeq: 1,
			Base: State{Seq: 1, Summary: "s"}, Carried: []uint64{2}}},
		{Head: &Head{}},
	} {
		if err := w.Write(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(buf.String(), "\n")
	body := strings.Join(lines[:len(lines)-2], "")
	sum := sha256.Sum256([]byte(body))
	want := `{"type":"session","format":2,"title":"t","created":"2025-01-02T03:04:05Z"}
{"type":"branch","label":"main","created":"2025-01-02T03:04:05Z","parent":-1,"fork_at_depth":0,"tip_depth":0,"fork_seq":0,"base":{"seq":0,"summary":""}}
{"type":"turn","seq":1,"user":{"role":"user","blocks":[{"type":"text","text":"q"}],"rendered_text":"q"},"reply":{"role":"assistant","blocks":[{"type":"text","text":"a"}],"rendered_text":"a"}}
{"type":"turn","seq":2,"user":{"role":"user","blocks":[{"type":"text","text":"q"}],"rendered_text":"q"},"failed":{"code":"cancelled","reason":"stop"}}
{"type":"state","seq":1,"summary":"s","turns":[1]}
{"type":"head","pinned":["p"],"model":"m","memory_tools":"on"}
{"type":"branch","label":"alt","created":"2025-01-02T03:04:05Z","parent":0,"fork_at_depth":2,"tip_depth":2,"fork_seq":1,"base":{"seq":1,"summary":"s"},"carried":[2]}
{"type":"head"}
{"type":"end","branches":2,"turns":2,"states":1,"active_branch":1,"sha256":"` + hex.EncodeToString(sum[:]) + `"}
`
	if got := buf.String(); got != want {
		t.Errorf("Writer wrote\n%s\nwant\n%s", got, want)
	}
	if !w.Started() {
		t.Error("Started() = false after Close")
	}
}
