package core

import (
	"fmt"
	"slices"
	"strings"

	"github.com/contextinfinity/ctxinf/messages"
)

// Budget is the token budget of one provider step (SRD §7.1): the input
// may use the model's context limit less the response reserve and a
// safety margin; retrieved memory has its own cap within that.
type Budget struct {
	ContextLimit    int `json:"context_limit"`    // the model's context window
	ResponseReserve int `json:"response_reserve"` // the step's max output tokens
	SafetyMargin    int `json:"safety_margin"`    // kept free for estimation error
	RetrievalMax    int `json:"retrieval_max"`    // at most this many tokens of retrieved memory, its fences and preamble included
	ChunkMax        int `json:"chunk_max"`        // a retrieved chunk above this is sent as its summary when shrinking
}

// Input is the tokens the assembled input may use.
func (b Budget) Input() int { return b.ContextLimit - b.ResponseReserve - b.SafetyMargin }

// Counter counts the tokens of a text; it must be deterministic.
type Counter func(text string) int

// ArtifactTokens is what a retrieved excerpt of text costs in a context:
// its text fenced as the adapters send it (messages.MemoryArtifact),
// counted with count.
func ArtifactTokens(text string, count Counter) int {
	return count(messages.MemoryArtifact(messages.RetrievedChunk{Text: text}))
}

// MemoryFrameTokens is what retrieved memory costs beyond its artifacts
// (messages.MemoryText): the preamble, the end line, and the blank line
// before the user's words, counted with count.
func MemoryFrameTokens(count Counter) int {
	return count(messages.MemoryPreamble) + count("\n"+messages.MemoryEnd+"\n\n")
}

// MessageOverhead is the tokens counted per message for its framing
// (role, separators), on top of its text.
const MessageOverhead = 4

// Candidate is a retrieved chunk the assembler may include, with the
// summary it may be replaced by when it is too large.
type Candidate struct {
	Chunk   messages.RetrievedChunk
	Summary string
}

// PendingMessages is a pending turn's messages, as the prompt shows them.
type PendingMessages struct {
	Turn     messages.TurnID
	Messages []messages.Message
}

// AssembleInput is everything a context is assembled from, already read
// from the store: the shell's work. Assemble only chooses and counts.
type AssembleInput struct {
	System       string
	Pinned       []string
	Summary      string
	Window       []messages.Message // committed recent messages, oldest first
	Pending      []PendingMessages  // unfolded turns, oldest first
	Retrieved    []Candidate        // in any order; ranked by score here
	User         messages.Message
	Continuation messages.Items
	Tools        []messages.Tool
	ToolMode     messages.ToolMode
}

// The sections of an assembled context, in prompt order (SRD §5.9).
const (
	SectionSystem    = "system"
	SectionPinned    = "pinned"
	SectionSummary   = "summary"
	SectionWindow    = "window"
	SectionPending   = "pending"
	SectionRetrieved = "retrieved"
	SectionUser      = "user"
)

// SectionUsage is one section's size in an assembled context.
type SectionUsage struct {
	Name   string `json:"name"`
	Tokens int    `json:"tokens"`
	Items  int    `json:"items"`
}

// The shrinker's steps (SRD §7.3), as ShrinkStep.Step names them.
const (
	StepDropChunk         = "drop_chunk"
	StepChunkSummary      = "chunk_summary"
	StepDropWindowMessage = "drop_window_message"
	StepDropPendingTurn   = "drop_pending_turn"
	StepShrinkSummary     = "shrink_summary"
)

// ShrinkStep is one step the shrinker took (SRD §7.3), logged.
type ShrinkStep struct {
	Step   string `json:"step"` // one of the Step* names
	Detail string `json:"detail"`
	Saved  int    `json:"saved_tokens"`
	// Target is, for shrink_summary, the tokens the summary had to fit in.
	Target int `json:"target_tokens,omitempty"`
}

// AssemblyReport is the arithmetic of an assembled context: the budget,
// each section's tokens, the shrink steps taken, and what is still over.
type AssemblyReport struct {
	Budget   Budget         `json:"budget"`
	Sections []SectionUsage `json:"sections"`
	Total    int            `json:"total"`
	Shrink   []ShrinkStep   `json:"shrink,omitempty"`
	// Over is how many tokens the context still exceeds the input budget
	// by after the deterministic steps; 0 when it fits. When it is over,
	// the next step is shrinking the summary (the librarian's shrink
	// prompt), then assembling again; if it still does not fit the turn
	// fails with Error.
	Over int `json:"over"`
	// Chunks are the retrieved chunks included, by score, and whether as
	// their summary.
	Chunks []ChunkUse `json:"chunks,omitempty"`
}

// ChunkUse is a retrieved chunk in an assembled context.
type ChunkUse struct {
	Chunk   messages.ChunkID `json:"chunk"`
	Score   float64          `json:"score"`
	Tokens  int              `json:"tokens"`
	Summary bool             `json:"summary"` // sent as its summary
}

// Fits reports whether the context fits its budget.
func (r AssemblyReport) Fits() bool { return r.Over == 0 }

// Error is the message a turn fails with when its context cannot fit: it
// names every section's size and the configuration keys that would make
// room.
func (r AssemblyReport) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "context too large: %d tokens over the input budget of %d (context limit %d - response reserve %d - safety margin %d); sections:",
		r.Over, r.Budget.Input(), r.Budget.ContextLimit, r.Budget.ResponseReserve, r.Budget.SafetyMargin)
	for _, s := range r.Sections {
		fmt.Fprintf(&b, " %s %d", s.Name, s.Tokens)
	}
	b.WriteString("; raise models.<name>.context_limit, lower runtime.max_output_tokens or models.<name>.max_output_tokens, unpin facts (DELETE /v1/branches/{branch}/pins/{id}, or /unpin N in chat; GET .../pins or /pins lists them), or fold pending turns (/commit)")
	return b.String()
}

// Assemble builds the context of a provider step from in within budget
// (SRD §5.9, §7): sections in fixed order — system instructions, pinned
// facts (always, verbatim), the head summary, the verbatim window,
// pending turns in order, retrieved memory (at most RetrievalMax tokens,
// best score first, each chunk counted as the adapters send it: fenced,
// after the memory's preamble, MemoryFrameTokens and ArtifactTokens), the user message and the tool-loop continuation.
// When the result is over budget it shrinks, in the SRD's order, logging
// each step: drop retrieved chunks, lowest score first (keeping the best
// one for the next step); replace oversized chunks by their summaries;
// drop the rest of retrieved memory; drop the window's folded messages,
// oldest first, then the oldest pending turns from this prompt (they stay
// pending until folded). What is still over is
// in the report (Over). It is deterministic: the same input, budget and
// counter give the same context and report.
func Assemble(in AssembleInput, budget Budget, count Counter) (messages.AssembledContext, AssemblyReport) {
	rep := AssemblyReport{Budget: budget}
	msgTokens := func(m messages.Message) int { return count(m.RenderedText) + MessageOverhead }

	// Retrieved candidates by score (ties: chunk id), within the cap.
	cands := slices.Clone(in.Retrieved)
	slices.SortStableFunc(cands, func(a, b Candidate) int {
		switch {
		case a.Chunk.Score > b.Chunk.Score:
			return -1
		case a.Chunk.Score < b.Chunk.Score:
			return 1
		}
		return a.Chunk.Chunk.Compare(b.Chunk.Chunk)
	})
	type chosen struct {
		c       Candidate
		tokens  int
		summary bool
	}
	var chunks []chosen
	frame := MemoryFrameTokens(count)
	retrieval := frame
	for _, c := range cands {
		n := ArtifactTokens(c.Chunk.Text, count)
		if budget.RetrievalMax > 0 && retrieval+n > budget.RetrievalMax {
			if s := c.Summary; s != "" && retrieval+ArtifactTokens(s, count) <= budget.RetrievalMax {
				n = ArtifactTokens(s, count)
				chunks = append(chunks, chosen{c, n, true})
				retrieval += n
			}
			continue
		}
		chunks = append(chunks, chosen{c, n, false})
		retrieval += n
	}
	// memoryTokens is what the retrieved memory costs with chunks in it:
	// their artifacts and, when there is one, the frame.
	memoryTokens := func() int {
		if len(chunks) == 0 {
			return 0
		}
		t := frame
		for _, c := range chunks {
			t += c.tokens
		}
		return t
	}

	pending := slices.Clone(in.Pending)
	window := slices.Clone(in.Window)
	fixed := count(in.System) + MessageOverhead + count(in.Summary) + msgTokens(in.User)
	for _, p := range in.Pinned {
		fixed += count(p) + 1
	}
	for _, it := range in.Continuation {
		fixed += count(itemText(it)) + MessageOverhead
	}
	pendingTokens := func(p PendingMessages) int {
		n := 0
		for _, m := range p.Messages {
			n += msgTokens(m)
		}
		return n
	}
	total := func() int {
		t := fixed
		for _, m := range window {
			t += msgTokens(m)
		}
		for _, p := range pending {
			t += pendingTokens(p)
		}
		return t + memoryTokens()
	}
	limit := budget.Input()
	// 1. Drop retrieved chunks, lowest score first, keeping the best.
	for total() > limit && len(chunks) > 1 {
		last := chunks[len(chunks)-1]
		chunks = chunks[:len(chunks)-1]
		rep.Shrink = append(rep.Shrink, ShrinkStep{Step: StepDropChunk, Saved: last.tokens,
			Detail: fmt.Sprintf("chunk %s (score %.3f)", last.c.Chunk.Chunk, last.c.Chunk.Score)})
	}
	// 2. Replace oversized chunks by their summaries.
	for i := range chunks {
		c := &chunks[i]
		if total() <= limit || c.summary || c.c.Summary == "" || (budget.ChunkMax > 0 && c.tokens <= budget.ChunkMax) {
			continue
		}
		n := ArtifactTokens(c.c.Summary, count)
		if n < c.tokens {
			rep.Shrink = append(rep.Shrink, ShrinkStep{Step: StepChunkSummary, Saved: c.tokens - n,
				Detail: fmt.Sprintf("chunk %s: %d tokens sent as a %d-token summary", c.c.Chunk.Chunk, c.tokens, n)})
			c.tokens, c.summary = n, true
		}
	}
	// Then the last chunk goes too.
	for total() > limit && len(chunks) > 0 {
		last := chunks[len(chunks)-1]
		chunks = chunks[:len(chunks)-1]
		rep.Shrink = append(rep.Shrink, ShrinkStep{Step: StepDropChunk, Saved: last.tokens,
			Detail: fmt.Sprintf("chunk %s (score %.3f)", last.c.Chunk.Chunk, last.c.Chunk.Score)})
	}
	// 3. Reduce the verbatim window: first its folded messages (the
	// summary holds them), then the oldest pending turns (they stay
	// pending until folded).
	for total() > limit && len(window) > 0 {
		rep.Shrink = append(rep.Shrink, ShrinkStep{Step: StepDropWindowMessage, Saved: msgTokens(window[0]),
			Detail: "the oldest folded message of the verbatim window (the summary holds it)"})
		window = window[1:]
	}
	for total() > limit && len(pending) > 0 {
		p := pending[0]
		pending = pending[1:]
		rep.Shrink = append(rep.Shrink, ShrinkStep{Step: StepDropPendingTurn, Saved: pendingTokens(p),
			Detail: fmt.Sprintf("pending turn %s left out of this prompt (it stays pending until folded)", p.Turn)})
	}

	ac := messages.AssembledContext{
		SystemInstructions: in.System,
		PinnedFacts:        slices.Clone(in.Pinned),
		Summary:            in.Summary,
		Window:             window,
		User:               in.User,
		Continuation:       slices.Clone(in.Continuation),
		Tools:              slices.Clone(in.Tools),
		ToolMode:           in.ToolMode,
	}
	pinnedTokens, windowTokens, pendingTotal, pendingMsgs, retrievedTokens := 0, 0, 0, 0, memoryTokens()
	for _, p := range in.Pinned {
		pinnedTokens += count(p) + 1
	}
	for _, m := range window {
		windowTokens += msgTokens(m)
	}
	for _, p := range pending {
		ac.Pending = append(ac.Pending, p.Messages...)
		pendingTotal += pendingTokens(p)
		pendingMsgs += len(p.Messages)
	}
	for _, c := range chunks {
		rc := c.c.Chunk
		if c.summary {
			rc.Text = c.c.Summary
		}
		ac.Retrieved = append(ac.Retrieved, rc)
		rep.Chunks = append(rep.Chunks, ChunkUse{Chunk: rc.Chunk, Score: rc.Score, Tokens: c.tokens, Summary: c.summary})
	}
	userTokens := msgTokens(in.User)
	for _, it := range in.Continuation {
		userTokens += count(itemText(it)) + MessageOverhead
	}
	rep.Sections = []SectionUsage{
		{SectionSystem, count(in.System) + MessageOverhead, 1},
		{SectionPinned, pinnedTokens, len(in.Pinned)},
		{SectionSummary, count(in.Summary), btoi(in.Summary != "")},
		{SectionWindow, windowTokens, len(window)},
		{SectionPending, pendingTotal, pendingMsgs},
		{SectionRetrieved, retrievedTokens, len(chunks)},
		{SectionUser, userTokens, 1 + len(in.Continuation)},
	}
	rep.Total = total()
	rep.Over = max(rep.Total-limit, 0)
	return ac, rep
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// itemText is the text a transcript item adds to a prompt, for counting.
func itemText(it messages.TranscriptItem) string {
	switch it := it.(type) {
	case messages.AssistantMessage:
		return it.Blocks.RenderedText()
	case messages.ToolCall:
		return it.Name + " " + string(it.Arguments)
	case messages.ToolOutput:
		return string(it.Output)
	}
	return ""
}
