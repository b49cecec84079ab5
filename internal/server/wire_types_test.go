package server

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// wireValue is a type of the API's JSON, with as few fields set as
// encode (zero values, but for phases, outcomes, chunk types and roles) and with every field set.
type wireValue struct {
	name      string
	min, full any
}

// wireValues are the response types of the runtime API.
func wireValues() []wireValue {
	at := time.Date(2026, 11, 29, 6, 4, 55, 123456789, time.UTC)
	id := func(b byte) [16]byte { return [16]byte{b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, b} }
	sid, bid, tid := messages.SessionID(id(1)), messages.BranchID(id(2)), messages.TurnID(id(3))
	step, chunk, state := messages.StepID(id(4)), messages.ChunkID(id(5)), messages.StateID(id(6))
	retention := 36 * time.Hour
	expires := at.Add(retention)
	own := "36h"
	temp := 0.5
	completed := messages.StepOutcome{Kind: messages.OutcomeCompleted}
	outcome := messages.FailedOutcome(messages.FailProvider, "upstream")

	sessionRow := persistence.SessionRow{ID: sid, Title: "t", ActiveBranch: bid, Created: at, Tenant: "acme", Retention: &retention,
		Metadata: map[string]string{"source": "proxy", "end_user": "alice"}}
	branchRow := persistence.BranchRow{ID: bid, Session: sid, Parent: messages.BranchID(id(7)), ForkAt: tid, ForkSeq: 3, Label: "alt", Created: at}
	turn := persistence.TurnRow{Branch: bid, Seq: 2, ID: tid, Phase: messages.PhaseFailed, Step: step, Reply: messages.TurnID(id(8)),
		Outcome: "failed", Code: messages.FailProvider, Reason: "upstream", StateAfter: state, StateSeq: 1, Updated: at}
	// The values the API answers are the rows through the server's
	// mapping (wire.go), which this pins with them.
	session, branch, apiTurn := Session(sessionRow), Branch(branchRow), Turn(turn)
	partial := &client.PartialOutput{Step: step, Text: "half", Incomplete: true, Displayed: 10, Durable: 8}
	chunkInfo := client.ChunkInfo{ID: chunk, Seq: 2, Node: tid, Start: 1, End: 5, Type: messages.ChunkType(1), Text: "text",
		Summary: "sum", TokenEst: 3}
	stepInfo := client.StepInfo{ID: step, Index: 1, Provider: "openai", Model: "gpt", Outcome: outcome, InputTokens: 100,
		OutputTokens: 20, CacheReadTokens: 50, CacheWriteTokens: 10, Displayed: 30, Durable: 29, Interrupted: true}
	chunkRow := persistence.ChunkRow{ID: chunk, Session: sid, Branch: bid, SourceTurn: tid, Seq: 2, Node: tid, Start: 1, End: 5,
		Type: messages.ChunkType(1), Text: "text", Summary: "sum", TokenEst: 3, Hash: persistence.Hash{1, 2, 3}, Created: at,
		Speaker: "Caroline", Time: time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC), Terms: map[string]float32{"x": 1}, TermCount: 1}
	job := persistence.Job{Type: persistence.JobIndex, Branch: bid, Turn: tid, Attempts: 2, Created: at}
	return []wireValue{
		{"Session", client.Session{}, session},
		{"Branch", client.Branch{}, branch},
		{"BranchInfo", client.BranchInfo{}, client.BranchInfo{Branch: branch, Tip: tid,
			State: messages.StateCheckpoint{ID: state, Seq: 1, Summary: "s", Pinned: []string{"p"}},
			Epoch: 1, TurnSeq: 2, Committed: 3, Failed: 4, Indexed: 5, Pending: 6, InFlight: &tid, Model: "m",
			MemoryTools: messages.MemoryToolsOn, MemoryToolsOn: true}},
		{"TurnResult", client.TurnResult{Phase: messages.PhaseAccepted, Outcome: completed}, client.TurnResult{Turn: tid, Seq: 2, Reply: "r", Phase: messages.PhaseFailed,
			Outcome: outcome, Error: "upstream", Displayed: 1, Durable: 2, TextDisplayed: 3, TextDurable: 4}},
		{"Turn", Turn(persistence.TurnRow{Phase: messages.PhaseAccepted}), apiTurn},
		{"TurnInfo", client.TurnInfo{Turn: api.Turn{Phase: messages.PhaseAccepted}}, client.TurnInfo{Turn: apiTurn, Steps: []client.StepInfo{stepInfo},
			Chunks: []client.ChunkInfo{chunkInfo}, Partial: partial, System: "sys",
			Latency:  api.TurnLatency{EmbedMs: 0.1, SearchMs: 0.4, AssembleMs: 0.9, StreamMs: 812.5, SummarizeMs: 3.2, IndexMs: 1.1},
			Tools:    []messages.Tool{{Name: "f", Description: "d", InputSchema: []byte(`{"type":"object"}`)}},
			ToolMode: messages.ToolsEnabled, ToolChoice: messages.ToolChoice{Mode: "tool", Name: "f"},
			Params: messages.GenParams{Temperature: &temp}}},
		{"StepInfo", client.StepInfo{Outcome: completed}, stepInfo},
		{"ChunkInfo", client.ChunkInfo{Type: messages.ChunkType(1)}, chunkInfo},
		{"PartialOutput", client.PartialOutput{}, *partial},
		{"PendingTurn", client.PendingTurn{Phase: messages.PhaseAccepted}, client.PendingTurn{Turn: tid, Seq: 2, Phase: messages.PhaseResponseFinalized,
			Reply: messages.NodeID(id(8))}},
		{"HistoryEntry", client.HistoryEntry{Message: messages.Message{Role: messages.RoleUser}}, client.HistoryEntry{Node: tid, Depth: 3,
			Message:      messages.Message{Role: messages.RoleUser, RenderedText: "hi", Speaker: "Caroline", Time: time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC)},
			PartialReply: partial}},
		{"Pin", client.Pin{}, client.Pin{ID: 1, Fact: "f", Seq: 2, At: at}},
		{"Chunk", Chunk(persistence.ChunkRow{Type: messages.ChunkType(1)}), Chunk(chunkRow)},
		{"Hit", Hit(actors.Hit{Chunk: persistence.ChunkRow{Type: messages.ChunkType(1)}}), Hit(actors.Hit{Chunk: chunkRow, Score: 0.5, Vector: 0.25, Text: 0.125, Relevance: 0.75})},
		{"Imported", client.Imported{}, client.Imported{Session: session, Branch: branch, Branches: 2, Turns: 3, States: 4}},
		{"Deleted", client.Deleted{}, client.Deleted{Session: sid, Branches: []messages.BranchID{bid}, Nodes: 1, Turns: 2,
			Blobs: 3, Chunks: 4, Steps: 5, Journals: 6, Keys: 7, ValueLogPending: true, TookMS: 1.5, ScrubMS: 0.25}},
		{"Retention", client.Retention{}, client.Retention{Session: sid, Own: &own, Idle: "36h", Source: "session",
			LastActivity: at, Expires: &expires, InFlight: true}},
		{"Job", Job(persistence.Job{}), Job(job)},
		{"Report", Report(actors.Report{}), Report(actors.Report{DataDir: "/data", Jobs: []persistence.Job{job},
			Sessions: []actors.ReportSession{{SessionRow: sessionRow, Branches: []actors.ReportBranch{{BranchRow: branchRow,
				Head: tid, HeadDepth: 4, Turns: 2, Pending: 1, Chunks: 3, Phases: map[string]int{"done": 2},
				States: []actors.ReportState{{Seq: 1, ID: state, Turns: []messages.TurnID{tid}}},
				LastTurns: []actors.ReportTurn{{TurnRow: turn, Partial: "half", Torn: true,
					Steps: []actors.ReportStep{{Index: 1, ID: step, Provider: "openai", Model: "gpt", Outcome: outcome,
						Items: 2, Displayed: 30, Durable: 29, Estimated: 90, InputTokens: 100, CacheReadTokens: 50}}}}}}}}})},
		{"Model", client.Model{}, client.Model{ID: "default", OwnedBy: "openai", ModelID: "gpt"}},
	}
}

// Each response type's JSON, with fields set and not, byte for byte
// (testdata/wire/types/NAME.json; -rewrite writes them).
func TestWireTypesGolden(t *testing.T) {
	t.Parallel()
	for _, v := range wireValues() {
		var got bytes.Buffer
		for _, x := range []any{v.min, v.full} {
			data, err := json.Marshal(x)
			if err != nil {
				t.Fatalf("%s: %v", v.name, err)
			}
			got.Write(append(data, '\n'))
		}
		file := "testdata/wire/types/" + v.name + ".json"
		if *rewrite {
			if err := os.MkdirAll("testdata/wire/types", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, got.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (run with -rewrite)", err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s: JSON\n%s\nwant\n%s(run with -rewrite and review the diff)", v.name, got.Bytes(), want)
		}
	}
}
