package actors

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/messages"
)

// BenchmarkContextHash hashes a context of about 17 KB of JSON (16
// window messages, four retrieved chunks, a summary): the work a turn's
// step does beside its stream (`go test -run X -bench ContextHash
// ./actors`).
func BenchmarkContextHash(b *testing.B) {
	text := strings.Repeat("The answer is forty-two, said the computer. ", 10)
	ac := messages.AssembledContext{SystemInstructions: "You are helpful.", Summary: strings.Repeat("summary words ", 50),
		User: messages.NewMessage(messages.RoleUser, messages.Text{Text: "question 12"})}
	for range 16 {
		ac.Window = append(ac.Window, messages.NewMessage(messages.RoleAssistant, messages.Text{Text: text}))
	}
	for range 4 {
		ac.Retrieved = append(ac.Retrieved, messages.RetrievedChunk{Text: text, Score: 0.5})
	}
	b.ReportAllocs()
	for b.Loop() {
		contextHash(ac)
	}
}

// BenchmarkContextHashMoving is BenchmarkContextHash as steps hash it:
// through the branch's contextHasher, the window moving on one message
// each time (`go test -run X -bench ContextHash ./actors`).
func BenchmarkContextHashMoving(b *testing.B) {
	text := strings.Repeat("The answer is forty-two, said the computer. ", 10)
	ac := messages.AssembledContext{SystemInstructions: "You are helpful.", Summary: strings.Repeat("summary words ", 50),
		User: messages.NewMessage(messages.RoleUser, messages.Text{Text: "question 12"})}
	msgs := make([]messages.Message, 64)
	for i := range msgs {
		msgs[i] = messages.NewMessage(messages.RoleAssistant, messages.Text{Text: fmt.Sprint(i, " ", text)})
	}
	for range 4 {
		ac.Retrieved = append(ac.Retrieved, messages.RetrievedChunk{Text: text, Score: 0.5})
	}
	var h contextHasher
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ac.Window = msgs[i%48 : i%48+16]
		h.hash(ac)
		i++
	}
}
