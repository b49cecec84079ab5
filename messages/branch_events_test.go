package messages

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustID[T ~[16]byte](s string) T {
	id, err := ParseID[T](s)
	if err != nil {
		panic(err)
	}
	return id
}

var (
	evSession = mustID[SessionID]("01JH0000000000000000000SES")
	evBranch  = mustID[BranchID]("01JH00000000000000000BRNCH")
	evParent  = mustID[BranchID]("01JH0000000000000000PARENT")
	evTurn    = mustID[TurnID]("01JH00000000000000000TVRN1")
	evTurn2   = mustID[TurnID]("01JH00000000000000000TVRN2")
	evReply   = mustID[NodeID]("01JH0000000000000000ANSWR1")
	evReply2  = mustID[NodeID]("01JH0000000000000000ANSWR2")
	evStep    = mustID[StepID]("01JH000000000000000000STEP")
	evState   = mustID[StateID]("01JH00000000000000000STATE")
	evAt      = time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC)
)

const (
	jSession = `"01JH0000000000000000000SES"`
	jBranch  = `"01JH00000000000000000BRNCH"`
	jParent  = `"01JH0000000000000000PARENT"`
	jTurn    = `"01JH00000000000000000TVRN1"`
	jTurn2   = `"01JH00000000000000000TVRN2"`
	jReply   = `"01JH0000000000000000ANSWR1"`
	jReply2  = `"01JH0000000000000000ANSWR2"`
	jStep    = `"01JH000000000000000000STEP"`
	jState   = `"01JH00000000000000000STATE"`
	jAt      = `"2025-01-02T03:04:05.000006Z"`
)

// eventCases pairs each kind of branch event with its JSON form.
var eventCases = []struct {
	name string
	ev   BranchEvent
	json string
}{
	{"branch_created/new",
		BranchCreated{Session: evSession, Branch: evBranch, At: evAt},
		`{"type":"branch_created","session":` + jSession + `,"branch":` + jBranch + `,"parent":"","fork_at":"","tip":"",` +
			`"state":{"id":"","seq":0,"summary":""},"turn_seq":0,"at":` + jAt + `}`},
	{"branch_created/fork",
		BranchCreated{Session: evSession, Branch: evBranch, Parent: evParent, ForkAt: evTurn2, Tip: evReply2,
			State:   StateCheckpoint{ID: evState, Seq: 4, Summary: "if a < b && c > d", Pinned: []string{"use tabs", "é"}},
			Pending: []PendingTurn{{Turn: evTurn, Seq: 6, Reply: evReply}, {Turn: evTurn2, Seq: 7, Reply: evReply2}},
			Window:  []NodeID{evTurn, evReply},
			TurnSeq: 7, At: evAt},
		`{"type":"branch_created","session":` + jSession + `,"branch":` + jBranch + `,"parent":` + jParent +
			`,"fork_at":` + jTurn2 + `,"tip":` + jReply2 +
			`,"state":{"id":` + jState + `,"seq":4,"summary":"if a < b && c > d","pinned":["use tabs","é"]}` +
			`,"pending":[{"turn":` + jTurn + `,"seq":6,"reply":` + jReply + `},{"turn":` + jTurn2 + `,"seq":7,"reply":` + jReply2 + `}]` +
			`,"window":[` + jTurn + `,` + jReply + `]` +
			`,"turn_seq":7,"at":` + jAt + `}`},
	{"turn_accepted",
		TurnAccepted{Turn: evTurn, Seq: 1, StateBefore: evState, At: evAt},
		`{"type":"turn_accepted","turn":` + jTurn + `,"seq":1,"state_before":` + jState + `,"at":` + jAt + `}`},
	{"turn_accepted/client",
		TurnAccepted{Turn: evTurn, Seq: 1, StateBefore: evState, System: "be <brief>",
			Tools:      []Tool{{Name: "lookup", Description: "find", InputSchema: []byte(`{"type":"object"}`)}},
			ToolChoice: ToolChoice{Mode: ToolChoiceTool, Name: "lookup"}, At: evAt},
		`{"type":"turn_accepted","turn":` + jTurn + `,"seq":1,"state_before":` + jState + `,"system":"be <brief>"` +
			`,"tools":[{"name":"lookup","description":"find","input_schema":{"type":"object"}}]` +
			`,"tool_choice":{"mode":"tool","name":"lookup"},"at":` + jAt + `}`},
	{"turn_accepted/params",
		TurnAccepted{Turn: evTurn, Seq: 1, StateBefore: evState, Params: GenParams{Temperature: new(0.25), TopK: new(40),
			MaxOutputTokens: new(300), Stop: []string{"END"}, ParallelToolCalls: new(false), ReasoningEffort: "low",
			ResponseFormat: &ResponseFormat{Type: FormatJSONSchema, Name: "answer", Schema: json.RawMessage(`{"type":"object"}`), Strict: new(true)},
			Thinking:       &Thinking{Type: ThinkingEnabled, BudgetTokens: 2048}}, At: evAt},
		`{"type":"turn_accepted","turn":` + jTurn + `,"seq":1,"state_before":` + jState +
			`,"params":{"temperature":0.25,"top_k":40,"max_output_tokens":300,"stop":["END"],` +
			`"response_format":{"type":"json_schema","name":"answer","schema":{"type":"object"},"strict":true},` +
			`"parallel_tool_calls":false,"reasoning_effort":"low","thinking":{"type":"enabled","budget_tokens":2048}},"at":` + jAt + `}`},
	{"turn_accepted/no state",
		TurnAccepted{Turn: evTurn, Seq: 1},
		`{"type":"turn_accepted","turn":` + jTurn + `,"seq":1,"state_before":"","at":"0001-01-01T00:00:00Z"}`},
	{"response_started",
		ResponseStarted{Turn: evTurn, Step: evStep, At: evAt},
		`{"type":"response_started","turn":` + jTurn + `,"step":` + jStep + `,"at":` + jAt + `}`},
	{"response_finalized",
		ResponseFinalized{Turn: evTurn, Step: evStep, Reply: evReply, Outcome: StepOutcome{Kind: OutcomeCompleted},
			Displayed: 120, Durable: 118, At: evAt},
		`{"type":"response_finalized","turn":` + jTurn + `,"step":` + jStep + `,"reply":` + jReply +
			`,"outcome":{"kind":"completed"},"displayed":120,"durable":118,"at":` + jAt + `}`},
	{"response_finalized/incomplete",
		ResponseFinalized{Turn: evTurn, Step: evStep, Reply: evReply, Outcome: StepOutcome{Kind: OutcomeIncomplete, Reason: "max_output_tokens"},
			Displayed: 1 << 63, Durable: 1<<64 - 1, At: evAt},
		`{"type":"response_finalized","turn":` + jTurn + `,"step":` + jStep + `,"reply":` + jReply +
			`,"outcome":{"kind":"incomplete","reason":"max_output_tokens"},"displayed":9223372036854775808,"durable":18446744073709551615,"at":` + jAt + `}`},
	{"turn_failed",
		TurnFailed{Turn: evTurn, Step: evStep, Reason: "provider: overloaded", At: evAt},
		`{"type":"turn_failed","turn":` + jTurn + `,"step":` + jStep + `,"reason":"provider: overloaded","at":` + jAt + `}`},
	{"turn_failed/code",
		TurnFailed{Turn: evTurn, Code: FailContextTooLarge, Reason: "context too large: 9 tokens over", At: evAt},
		`{"type":"turn_failed","turn":` + jTurn + `,"step":"","code":"context_too_large","reason":"context too large: 9 tokens over","at":` + jAt + `}`},
	{"turn_failed/no step",
		TurnFailed{Turn: evTurn, Reason: "context: too large", At: evAt},
		`{"type":"turn_failed","turn":` + jTurn + `,"step":"","reason":"context: too large","at":` + jAt + `}`},
	{"state_committed",
		StateCommitted{State: StateCheckpoint{ID: evState, Seq: 2, Summary: "We chose Go.", Pinned: []string{"<b>"}},
			Turns: []TurnID{evTurn, evTurn2}, Epoch: 3, At: evAt},
		`{"type":"state_committed","state":{"id":` + jState + `,"seq":2,"summary":"We chose Go.","pinned":["<b>"]}` +
			`,"turns":[` + jTurn + `,` + jTurn2 + `],"epoch":3,"at":` + jAt + `}`},
	{"state_committed/shrunk",
		StateCommitted{State: StateCheckpoint{ID: evState, Seq: 3, Summary: "Go."}, Shrunk: true, Epoch: 4, At: evAt},
		`{"type":"state_committed","state":{"id":` + jState + `,"seq":3,"summary":"Go."},"shrunk":true,"epoch":4,"at":` + jAt + `}`},
	{"chunks_forced",
		ChunksForced{Chunks: []ChunkID{ChunkID(evTurn)}, At: evAt},
		`{"type":"chunks_forced","chunks":[` + jTurn + `],"at":` + jAt + `}`},
	{"turn_recorded",
		TurnRecorded{Turn: evTurn, Seq: 4, Reply: evReply, At: evAt},
		`{"type":"turn_recorded","turn":` + jTurn + `,"seq":4,"reply":` + jReply + `,"at":` + jAt + `}`},
	{"turn_indexed",
		TurnIndexed{Turn: evTurn, Chunks: 3, At: evAt},
		`{"type":"turn_indexed","turn":` + jTurn + `,"chunks":3,"at":` + jAt + `}`},
	{"tool_calls_issued",
		ToolCallsIssued{Turn: evTurn, Step: evStep, Items: Items{
			AssistantMessage{Blocks: Blocks{Text{Text: "looking"}}},
			ToolCall{CallID: "c1", Name: "grep", Arguments: []byte(`"{\"q\":\"x\"}"`)}}, At: evAt},
		`{"type":"tool_calls_issued","turn":` + jTurn + `,"step":` + jStep +
			`,"items":[{"type":"assistant_message","blocks":[{"type":"text","text":"looking"}]},` +
			`{"type":"tool_call","call_id":"c1","name":"grep","arguments":"{\"q\":\"x\"}"}],"at":` + jAt + `}`},
	{"tool_results_recorded",
		ToolResultsRecorded{Turn: evTurn, Outputs: Items{ToolOutput{CallID: "c1", Output: []byte(`"2 matches"`)},
			ToolOutput{CallID: "c2", Output: []byte(`"interrupted"`), IsError: true}}, Next: evStep, At: evAt},
		`{"type":"tool_results_recorded","turn":` + jTurn + `,"outputs":[{"type":"tool_output","call_id":"c1","output":"2 matches"},` +
			`{"type":"tool_output","call_id":"c2","output":"interrupted","is_error":true}],"next":` + jStep + `,"at":` + jAt + `}`},
	{"tool_results_recorded/last",
		ToolResultsRecorded{Turn: evTurn, Outputs: Items{ToolOutput{CallID: "c1", Output: []byte(`"x"`)}}, At: evAt},
		`{"type":"tool_results_recorded","turn":` + jTurn + `,"outputs":[{"type":"tool_output","call_id":"c1","output":"x"}],"next":"","at":` + jAt + `}`},
	{"step_retried",
		StepRetried{Turn: evTurn, Step: evStep, Next: mustID[StepID]("01JH000000000000000000STP2"), Reason: "context too large", At: evAt},
		`{"type":"step_retried","turn":` + jTurn + `,"step":` + jStep + `,"next":"01JH000000000000000000STP2","reason":"context too large","at":` + jAt + `}`},
	{"model_selected",
		ModelSelected{Model: "claude", At: evAt},
		`{"type":"model_selected","model":"claude","at":` + jAt + `}`},
	{"memory_tools_selected/on",
		MemoryToolsSelected{Setting: MemoryToolsOn, At: evAt},
		`{"type":"memory_tools_selected","memory_tools":"on","at":` + jAt + `}`},
	{"memory_tools_selected/off",
		MemoryToolsSelected{Setting: MemoryToolsOff, At: evAt},
		`{"type":"memory_tools_selected","memory_tools":"off","at":` + jAt + `}`},
	{"memory_tools_selected/default",
		MemoryToolsSelected{At: evAt},
		`{"type":"memory_tools_selected","memory_tools":"default","at":` + jAt + `}`},
	{"branch_created/memory_tools",
		BranchCreated{Session: evSession, Branch: evBranch, Parent: evParent, ForkAt: evTurn, TurnSeq: 1, MemoryTools: MemoryToolsOff, At: evAt},
		`{"type":"branch_created","session":` + jSession + `,"branch":` + jBranch + `,"parent":` + jParent + `,"fork_at":` + jTurn + `,"tip":"",` +
			`"state":{"id":"","seq":0,"summary":""},"turn_seq":1,"memory_tools":"off","at":` + jAt + `}`},
	{"fact_pinned",
		FactPinned{Fact: "answer in \"French\"\n& be brief", At: evAt},
		`{"type":"fact_pinned","fact":"answer in \"French\"\n& be brief","at":` + jAt + `}`},
	{"fact_unpinned",
		FactUnpinned{Pin: 3, At: evAt},
		`{"type":"fact_unpinned","pin":3,"at":` + jAt + `}`},
	{"fact_edited",
		FactEdited{Pin: 12, Fact: "answer in English", At: evAt},
		`{"type":"fact_edited","pin":12,"fact":"answer in English","at":` + jAt + `}`},
	{"branch_created/pins",
		BranchCreated{Session: evSession, Branch: evBranch, State: StateCheckpoint{ID: evState, Pinned: []string{"a", "c"}},
			Pins: []PinnedFact{{ID: 1, Fact: "a", Seq: 0, At: evAt}, {ID: 3, Fact: "c", Seq: 2, At: evAt}}, TurnSeq: 2, At: evAt},
		`{"type":"branch_created","session":` + jSession + `,"branch":` + jBranch + `,"parent":"","fork_at":"","tip":""` +
			`,"state":{"id":` + jState + `,"seq":0,"summary":"","pinned":["a","c"]}` +
			`,"pins":[{"id":1,"fact":"a","seq":0,"at":` + jAt + `},{"id":3,"fact":"c","seq":2,"at":` + jAt + `}]` +
			`,"turn_seq":2,"at":` + jAt + `}`},
}

func TestBranchEventRoundTrip(t *testing.T) {
	for _, tc := range eventCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MarshalBranchEvent(tc.ev)
			if err != nil || string(got) != tc.json {
				t.Fatalf("MarshalBranchEvent(%+v) = %s, %v, want %s", tc.ev, got, err, tc.json)
			}
			back, err := UnmarshalBranchEvent(got)
			if err != nil || !reflect.DeepEqual(back, tc.ev) {
				t.Fatalf("UnmarshalBranchEvent(%s) = %+v, %v, want %+v", got, back, err, tc.ev)
			}
		})
	}
}

func TestBranchEventDecodeNormalizes(t *testing.T) {
	tests := []struct {
		json string
		want BranchEvent
	}{
		// Times come back in UTC.
		{`{"type":"fact_pinned","fact":"x","at":"2025-01-02T04:04:05.000006+01:00"}`, FactPinned{Fact: "x", At: evAt}},
		// Absent fields read as zero, unknown fields are ignored.
		{`{"type":"fact_pinned","extra":[1,2]}`, FactPinned{}},
		{`{"type":"turn_indexed","turn":` + jTurn + `}`, TurnIndexed{Turn: evTurn}},
		// Empty lists decode as nil.
		{`{"type":"state_committed","state":{"id":` + jState + `,"seq":1,"summary":"s","pinned":[]},"turns":[],"epoch":0}`,
			StateCommitted{State: StateCheckpoint{ID: evState, Seq: 1, Summary: "s"}}},
		{`{"type":"branch_created","session":` + jSession + `,"branch":` + jBranch + `,"pending":[]}`,
			BranchCreated{Session: evSession, Branch: evBranch}},
		// A tool's schema written as base64 (before it was written as
		// the JSON it holds) reads as its bytes.
		{`{"type":"turn_accepted","turn":` + jTurn + `,"seq":1,"tools":[{"name":"lookup","description":"find","input_schema":"eyJ0eXBlIjoib2JqZWN0In0="}]}`,
			TurnAccepted{Turn: evTurn, Seq: 1, Tools: []Tool{{Name: "lookup", Description: "find", InputSchema: []byte(`{"type":"object"}`)}}}},
		// Lower-case ULIDs are accepted.
		{`{"type":"turn_indexed","turn":` + strings.ToLower(jTurn) + `,"chunks":1}`, TurnIndexed{Turn: evTurn, Chunks: 1}},
	}
	for _, tc := range tests {
		got, err := UnmarshalBranchEvent([]byte(tc.json))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("UnmarshalBranchEvent(%s) = %+v, %v, want %+v", tc.json, got, err, tc.want)
		}
	}
}

func TestBranchEventDecodeErrors(t *testing.T) {
	tests := []struct {
		json string
		is   error
		want string // a substring of the error
	}{
		{`[]`, ErrInvalidEvent, "not a JSON object"},
		{`{"type":`, ErrInvalidEvent, "unexpected end"},
		{`{}`, ErrInvalidEvent, `field "type" is required`},
		{`{"type":"turn_deleted"}`, ErrUnknownValue, `messages: unknown value: branch event "turn_deleted"`},
		{`{"type":"turn_accepted","seq":1}`, ErrInvalidEvent, `turn_accepted: field "turn" is required`},
		{`{"type":"turn_accepted","turn":"nope"}`, ErrInvalidID, `turn_accepted: field "turn" is invalid`},
		{`{"type":"turn_accepted","turn":` + jTurn + `,"seq":-1}`, ErrInvalidEvent, `field "seq" is invalid`},
		{`{"type":"turn_accepted","turn":` + jTurn + `,"seq":1.5}`, ErrInvalidEvent, `field "seq" is invalid`},
		{`{"type":"response_started","turn":` + jTurn + `}`, ErrInvalidEvent, `response_started: field "step" is required`},
		{`{"type":"response_finalized","turn":` + jTurn + `,"step":` + jStep + `,"reply":` + jReply + `}`,
			ErrInvalidEvent, `response_finalized: field "outcome" is required`},
		{`{"type":"response_finalized","turn":` + jTurn + `,"step":` + jStep + `,"reply":` + jReply + `,"outcome":{"kind":"meh"}}`,
			ErrUnknownValue, `field "outcome" is invalid`},
		{`{"type":"state_committed","state":{"seq":1}}`, ErrInvalidEvent, `state_committed: field "state" is invalid: field "id" is required`},
		{`{"type":"state_committed","state":[]}`, ErrInvalidEvent, `field "state" is invalid`},
		{`{"type":"state_committed","state":{"id":` + jState + `},"turns":"x"}`, ErrInvalidEvent, `field "turns" is invalid`},
		{`{"type":"branch_created","branch":` + jBranch + `}`, ErrInvalidEvent, `branch_created: field "session" is required`},
		{`{"type":"fact_pinned","at":"yesterday"}`, ErrInvalidEvent, `fact_pinned: field "at" is invalid`},
		{`{"type":"fact_pinned","at":"0000-01-01T00:00:00+01:00"}`, ErrInvalidEvent, `year -1 is outside`},
		{`{"type":"fact_unpinned","at":` + jAt + `}`, ErrInvalidEvent, `fact_unpinned: field "pin" is required`},
		{`{"type":"fact_edited","pin":0,"fact":"x"}`, ErrInvalidEvent, `fact_edited: field "pin" is required`},
		{`{"type":"fact_edited","pin":-1,"fact":"x"}`, ErrInvalidEvent, `fact_edited: field "pin" is invalid`},
		{`{"type":"memory_tools_selected","at":` + jAt + `}`, ErrInvalidEvent, `memory_tools_selected: field "memory_tools" is required`},
		{`{"type":"memory_tools_selected","memory_tools":"maybe"}`, ErrUnknownValue,
			`memory_tools_selected: field "memory_tools" is invalid: messages: unknown value: memory tools setting "maybe"`},
		{`{"type":"memory_tools_selected","memory_tools":true}`, ErrInvalidEvent, `memory_tools_selected: field "memory_tools" is invalid`},
		{`{"type":"branch_created","session":` + jSession + `,"branch":` + jBranch + `,"memory_tools":"ON"}`, ErrUnknownValue,
			`branch_created: field "memory_tools" is invalid`},
	}
	for _, tc := range tests {
		got, err := UnmarshalBranchEvent([]byte(tc.json))
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("UnmarshalBranchEvent(%s) = %+v, %v, want an error wrapping %v containing %q", tc.json, got, err, tc.is, tc.want)
		}
	}
}

func TestBranchEventEncodeErrors(t *testing.T) {
	tests := []struct {
		ev   BranchEvent
		want string
	}{
		{nil, "messages: invalid branch event: nil event"},
		{&FactPinned{}, "messages: invalid branch event: unsupported type *messages.FactPinned"},
		{TurnAccepted{}, `messages: invalid branch event: turn_accepted: field "turn" is required`},
		{BranchCreated{Branch: evBranch}, `messages: invalid branch event: branch_created: field "session" is required`},
		{ResponseFinalized{Turn: evTurn, Step: evStep, Reply: evReply}, `messages: invalid branch event: response_finalized: field "outcome" is required`},
		{StateCommitted{}, `messages: invalid branch event: state_committed: field "state" is invalid: field "id" is required`},
		{FactPinned{At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, `messages: invalid branch event: fact_pinned: field "at" is invalid`},
		{FactUnpinned{}, `messages: invalid branch event: fact_unpinned: field "pin" is required`},
		{FactEdited{Fact: "x"}, `messages: invalid branch event: fact_edited: field "pin" is required`},
		{MemoryToolsSelected{Setting: "yes"}, `messages: invalid branch event: memory_tools_selected: field "memory_tools" is invalid: "yes"`},
		{BranchCreated{Session: evSession, Branch: evBranch, MemoryTools: "1"}, `messages: invalid branch event: branch_created: field "memory_tools" is invalid`},
	}
	for _, tc := range tests {
		got, err := MarshalBranchEvent(tc.ev)
		if !errors.Is(err, ErrInvalidEvent) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("MarshalBranchEvent(%#v) = %s, %v, want %s", tc.ev, got, err, tc.want)
		}
	}
}

func TestBranchEventTimeInUTC(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	ev := FactPinned{Fact: "x", At: evAt.In(paris)}
	data, err := MarshalBranchEvent(ev)
	if want := `{"type":"fact_pinned","fact":"x","at":` + jAt + `}`; err != nil || string(data) != want {
		t.Fatalf("MarshalBranchEvent(%+v) = %s, %v, want %s", ev, data, err, want)
	}
}

var eventSeeds = []string{
	`{"type":"turn_accepted","turn":"01jh00000000000000000tvrn1","seq":18446744073709551615,"at":null}`,
	`{"type":"fact_pinned","fact":"\ud800","at":"9999-12-31T23:59:59.999999999-00:30"}`,
	`{"type":"branch_created","session":"01JH0000000000000000000SES","branch":"01JH00000000000000000BRNCH","pending":[null,{"TURN":"01JH00000000000000000TVRN1"}],"state":null}`,
	`{"type":"state_committed","state":{"id":"01JH00000000000000000STATE","pinned":[null]},"turns":[null,""]}`,
	`{"type":"turn_failed","turn":"01JH00000000000000000TVRN1","type":"fact_pinned"}`,
}

func FuzzBranchEventRoundTrip(f *testing.F) {
	for _, s := range eventSeeds {
		f.Add([]byte(s))
	}
	for _, tc := range eventCases {
		f.Add([]byte(tc.json))
	}
	f.Fuzz(func(t *testing.T, x []byte) {
		ev, err := UnmarshalBranchEvent(x)
		if err != nil {
			if !errors.Is(err, ErrInvalidEvent) && !errors.Is(err, ErrUnknownValue) {
				t.Fatalf("UnmarshalBranchEvent(%q) = %v, want an error wrapping ErrInvalidEvent or ErrUnknownValue", x, err)
			}
			return
		}
		y, err := MarshalBranchEvent(ev)
		if err != nil {
			t.Fatalf("MarshalBranchEvent(%#v) = %v", ev, err)
		}
		ev2, err := UnmarshalBranchEvent(y)
		if err != nil || !reflect.DeepEqual(ev2, ev) {
			t.Fatalf("UnmarshalBranchEvent(%s) = %#v, %v, want %#v", y, ev2, err, ev)
		}
		z, err := MarshalBranchEvent(ev2)
		if err != nil || string(z) != string(y) {
			t.Fatalf("MarshalBranchEvent(%#v) = %s, %v, want %s", ev2, z, err, y)
		}
	})
}

func TestParseMemoryTools(t *testing.T) {
	t.Parallel()
	for _, m := range []MemoryTools{MemoryToolsDefault, MemoryToolsOn, MemoryToolsOff} {
		got, err := ParseMemoryTools(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMemoryTools(%q) = %q, %v, want %q", m.String(), got, err, m)
		}
	}
	for _, s := range []string{"", "On", "true", "1", "none"} {
		if _, err := ParseMemoryTools(s); !errors.Is(err, ErrUnknownValue) || !strings.Contains(err.Error(), "want default, on or off") {
			t.Errorf("ParseMemoryTools(%q) = %v, want ErrUnknownValue", s, err)
		}
	}
	for _, tc := range []struct {
		m        MemoryTools
		def, out bool
	}{{MemoryToolsDefault, true, true}, {MemoryToolsDefault, false, false}, {MemoryToolsOn, false, true}, {MemoryToolsOff, true, false}} {
		if got := tc.m.Resolve(tc.def); got != tc.out {
			t.Errorf("%s.Resolve(%v) = %v, want %v", tc.m, tc.def, got, tc.out)
		}
	}
}
