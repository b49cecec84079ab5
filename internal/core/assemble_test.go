package core

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// words counts whitespace-separated words: a deterministic stand-in for a
// tokenizer.
func words(s string) int { return len(strings.Fields(s)) }

func textOf(n int, tag string) string { return strings.TrimSpace(strings.Repeat(tag+" ", n)) }

func msg(role messages.Role, n int, tag string) messages.Message {
	return messages.NewMessage(role, messages.Text{Text: textOf(n, tag)})
}

func TestAssembleShrinksInOrder(t *testing.T) {
	t.Parallel()
	in := AssembleInput{
		System:  textOf(10, "sys"),
		Pinned:  []string{"fact one", "fact two"},
		Summary: textOf(20, "sum"),
		Pending: []PendingMessages{
			{Turn: id[messages.TurnID]("P1"), Messages: []messages.Message{msg(messages.RoleUser, 30, "p1"), msg(messages.RoleAssistant, 30, "r1")}},
			{Turn: id[messages.TurnID]("P2"), Messages: []messages.Message{msg(messages.RoleUser, 5, "p2"), msg(messages.RoleAssistant, 5, "r2")}},
		},
		Retrieved: []Candidate{
			{Chunk: messages.RetrievedChunk{Chunk: id[messages.ChunkID]("C1"), Text: textOf(40, "c1"), Score: 0.9}, Summary: "c1 short"},
			{Chunk: messages.RetrievedChunk{Chunk: id[messages.ChunkID]("C2"), Text: textOf(10, "c2"), Score: 0.8}},
			{Chunk: messages.RetrievedChunk{Chunk: id[messages.ChunkID]("C3"), Text: textOf(10, "c3"), Score: 0.5}},
		},
		User: msg(messages.RoleUser, 5, "q"),
	}
	budget := Budget{ContextLimit: 1000, ResponseReserve: 100, SafetyMargin: 10, RetrievalMax: 500, ChunkMax: 20}
	steps := func(r AssemblyReport) string {
		var s []string
		for _, st := range r.Shrink {
			s = append(s, st.Step)
		}
		return strings.Join(s, ",")
	}
	// Everything fits: nothing shrinks, sections in order.
	ac, rep := Assemble(in, budget, words)
	if !rep.Fits() || len(rep.Shrink) != 0 || len(ac.Retrieved) != 3 || len(ac.Pending) != 4 || rep.Total > budget.Input() {
		t.Fatalf("roomy budget: %+v", rep)
	}
	var names []string
	for _, s := range rep.Sections {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "system,pinned,summary,window,pending,retrieved,user" {
		t.Fatalf("sections %v", names)
	}
	// Tighter: the lowest-scored chunks go first, then the best chunk
	// becomes its summary.
	budget.ContextLimit = rep.Total - 30 + 110
	ac, rep = Assemble(in, budget, words)
	if got := steps(rep); got != "drop_chunk,drop_chunk,chunk_summary" || !rep.Fits() || ac.Retrieved[0].Text != "c1 short" {
		t.Fatalf("tight budget: steps %q, %+v", got, rep)
	}
	// Tighter still: retrieval goes, then the oldest pending turn.
	budget.ContextLimit = 177 // input 67: the fixed sections (49) and the newest pending turn (18)
	ac, rep = Assemble(in, budget, words)
	if got := steps(rep); got != "drop_chunk,drop_chunk,chunk_summary,drop_chunk,drop_pending_turn" || !rep.Fits() ||
		len(ac.Retrieved) != 0 || len(ac.Pending) != 2 || ac.Pending[0].RenderedText != textOf(5, "p2") {
		t.Fatalf("tighter budget: steps %q, pending %d, %+v", got, len(ac.Pending), rep)
	}
	// Impossible: over, with a message naming sizes and keys.
	budget.ContextLimit = 150
	_, rep = Assemble(in, budget, words)
	if rep.Fits() || !strings.Contains(rep.Error(), "summary 20") || !strings.Contains(rep.Error(), "context_limit") ||
		!strings.Contains(rep.Error(), "unpin facts (DELETE /v1/branches/{branch}/pins/{id}, or /unpin N in chat") {
		t.Fatalf("impossible budget: %+v: %s", rep, rep.Error())
	}
}

// TestAssembleProperty: over random inputs and budgets the assembler is
// deterministic, always keeps the system text, every pinned fact and the
// user message, keeps retrieval within its cap, drops pending turns
// oldest first and only once retrieval and the folded window are gone,
// and a context that fits is within budget.
func TestAssembleProperty(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	for run := range 2000 {
		in := AssembleInput{System: textOf(1+r.IntN(50), "s"), Summary: textOf(r.IntN(300), "u"), User: msg(messages.RoleUser, 1+r.IntN(50), "q")}
		for i := range r.IntN(5) {
			in.Pinned = append(in.Pinned, textOf(1+r.IntN(20), fmt.Sprint("f", i)))
		}
		for i := range r.IntN(4) {
			in.Window = append(in.Window, msg(messages.RoleUser, r.IntN(40), fmt.Sprint("w", i)))
		}
		for i := range r.IntN(8) {
			in.Pending = append(in.Pending, PendingMessages{Turn: id[messages.TurnID](fmt.Sprint("P", i)),
				Messages: []messages.Message{msg(messages.RoleUser, r.IntN(100), "pu"), msg(messages.RoleAssistant, r.IntN(200), "pa")}})
		}
		for i := range r.IntN(10) {
			c := Candidate{Chunk: messages.RetrievedChunk{Chunk: id[messages.ChunkID](fmt.Sprint("C", i)), Text: textOf(1+r.IntN(400), "c"),
				Score: float64(r.IntN(100)) / 100}}
			if r.IntN(2) == 0 {
				c.Summary = textOf(1+r.IntN(30), "cs")
			}
			in.Retrieved = append(in.Retrieved, c)
		}
		budget := Budget{ContextLimit: 200 + r.IntN(3000), ResponseReserve: r.IntN(200), SafetyMargin: r.IntN(50),
			RetrievalMax: r.IntN(1500), ChunkMax: r.IntN(300)}
		ac, rep := Assemble(in, budget, words)
		ac2, rep2 := Assemble(in, budget, words)
		fail := func(format string, args ...any) {
			t.Fatalf("run %d (seed %d): %s\nbudget %+v\nreport %+v", run, seed, fmt.Sprintf(format, args...), budget, rep)
		}
		if !reflect.DeepEqual(ac, ac2) || !reflect.DeepEqual(rep, rep2) {
			fail("not deterministic")
		}
		sum := 0
		for _, s := range rep.Sections {
			sum += s.Tokens
		}
		if sum != rep.Total {
			fail("sections add to %d, total %d", sum, rep.Total)
		}
		if rep.Fits() && rep.Total > budget.Input() {
			fail("fits with %d tokens over an input budget of %d", rep.Total, budget.Input())
		}
		if !rep.Fits() && (len(ac.Retrieved) > 0 || len(ac.Pending) > 0 || len(ac.Window) > 0) {
			fail("over budget with droppable sections left")
		}
		if !reflect.DeepEqual(ac.PinnedFacts, in.Pinned) && len(in.Pinned) > 0 || ac.SystemInstructions != in.System ||
			ac.User.RenderedText != in.User.RenderedText {
			fail("a section that is always kept was changed")
		}
		if sent := words(messages.MemoryText(ac.Retrieved)); rep.Sections[5].Tokens != sent {
			fail("retrieved memory counted as %d tokens, sent as %d", rep.Sections[5].Tokens, sent)
		}
		if rep.Sections[5].Tokens > budget.RetrievalMax && budget.RetrievalMax > 0 {
			fail("retrieval %d tokens over its cap %d", rep.Sections[5].Tokens, budget.RetrievalMax)
		}
		kept := len(ac.Pending) / 2
		for i := range kept {
			if ac.Pending[2*i].RenderedText != in.Pending[len(in.Pending)-kept+i].Messages[0].RenderedText {
				fail("pending turns were not dropped oldest first")
			}
		}
		if kept < len(in.Pending) && (len(ac.Retrieved) > 0 || len(ac.Window) > 0) {
			fail("a pending turn was dropped while retrieved chunks remain")
		}
	}
}
