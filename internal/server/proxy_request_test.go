package server

import (
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// The ids of a turn's steps: one per step, each naming the turn, and
// nothing else parses as one.
func TestStepIDs(t *testing.T) {
	t.Parallel()
	turn := messages.NewID[messages.TurnID](time.Now())
	for _, n := range []int{0, 1, 2, 10, 123} {
		id := stepID("resp_", turn, n)
		got, m, ok := parseStepID("resp_", id)
		if !ok || got != turn || m != n {
			t.Errorf("parseStepID(%q) = %s, %d, %v; want %s, %d", id, got, m, ok, turn, n)
		}
	}
	if id := stepID("chatcmpl-", turn, 0); id != "chatcmpl-"+turn.String() {
		t.Errorf("stepID(0) = %q, want the turn's id alone", id)
	}
	for _, id := range []string{"", "resp_", "resp_x", "chatcmpl-" + turn.String(), "resp_" + turn.String() + "_",
		"resp_" + turn.String() + "_0", "resp_" + turn.String() + "_01", "resp_" + turn.String() + "_-1",
		"resp_" + turn.String() + "_+1", "resp_" + turn.String() + "_1_2", "resp_" + turn.String() + "x"} {
		if got, n, ok := parseStepID("resp_", id); ok {
			t.Errorf("parseStepID(%q) = %s, %d, true; want not an id", id, got, n)
		}
	}
	msgs := []convMessage{{Role: "system"}, {Role: "user"}, {Role: "assistant"}, {Role: "tool"}, {Role: "assistant"}, {Role: "tool"}}
	for _, c := range []struct {
		msgs     []convMessage
		previous int // -1: none
		want     int
	}{
		{msgs[:2], -1, 0},
		{msgs[:4], -1, 1},
		{msgs, -1, 2},
		{msgs, 5, 2}, // a user message: the previous response's step does not count
		{[]convMessage{{Role: "tool"}}, 0, 1},
		{[]convMessage{{Role: "tool"}, {Role: "tool"}}, 3, 4},
		{[]convMessage{{Role: "user"}}, 3, 0},
	} {
		pc := &proxyCall{msgs: c.msgs}
		if c.previous >= 0 {
			pc.previous, pc.previousStep = turn, c.previous
		}
		if got := pc.step(); got != c.want {
			t.Errorf("step(%d messages, previous step %d) = %d, want %d", len(c.msgs), c.previous, got, c.want)
		}
	}
}

// FuzzParseStepID: whatever parses is the id of its turn and step.
func FuzzParseStepID(f *testing.F) {
	f.Add("resp_01J0000000000000000000000A_3")
	f.Add("resp_01J0000000000000000000000A")
	f.Add("resp__1")
	f.Fuzz(func(t *testing.T, id string) {
		turn, n, ok := parseStepID("resp_", id)
		if ok && stepID("resp_", turn, n) != id {
			t.Errorf("parseStepID(%q) = %s, %d: stepID gives %q", id, turn, n, stepID("resp_", turn, n))
		}
	})
}
