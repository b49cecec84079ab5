package server

import (
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/persistence"
)

// The one mapping from the store's rows and the runtime's values to the
// API's types (package api). Every answer of the runtime API goes
// through it, so a change of a row does not change the JSON; the TUI on
// the embedded runtime shows what it maps, as a client of a server would.

// Session is a session row as the API answers it.
func Session(row persistence.SessionRow) api.Session {
	return api.Session{ID: row.ID, Title: row.Title, ActiveBranch: row.ActiveBranch, Created: row.Created,
		Tenant: row.Tenant, Retention: row.Retention, Metadata: row.Metadata}
}

// Sessions is Session of each row, never nil.
func Sessions(rows []persistence.SessionRow) []api.Session { return mapAll(rows, Session) }

// Branch is a branch row as the API answers it.
func Branch(row persistence.BranchRow) api.Branch {
	return api.Branch{ID: row.ID, Session: row.Session, Parent: row.Parent, ForkAt: row.ForkAt, ForkSeq: row.ForkSeq,
		Label: row.Label, Created: row.Created}
}

// Branches is Branch of each row, never nil.
func Branches(rows []persistence.BranchRow) []api.Branch { return mapAll(rows, Branch) }

// Turn is a turn row as the API answers it.
func Turn(row persistence.TurnRow) api.Turn {
	return api.Turn{Branch: row.Branch, Seq: row.Seq, ID: row.ID, Phase: row.Phase, Step: row.Step, Reply: row.Reply,
		Outcome: row.Outcome, Code: row.Code, Reason: row.Reason, StateAfter: row.StateAfter, StateSeq: row.StateSeq,
		Updated: row.Updated}
}

// Chunk is a chunk row as a search hit carries it.
func Chunk(row persistence.ChunkRow) api.Chunk {
	return api.Chunk{ID: row.ID, Session: row.Session, Branch: row.Branch, SourceTurn: row.SourceTurn, Seq: row.Seq,
		Node: row.Node, Start: row.Start, End: row.End, Type: row.Type, Text: row.Text, Summary: row.Summary,
		TokenEst: row.TokenEst, Hash: row.Hash, Created: row.Created, Speaker: row.Speaker, Time: row.Time}
}

// Hit is a search hit as the API answers it.
func Hit(h actors.Hit) api.Hit {
	return api.Hit{Chunk: Chunk(h.Chunk), Score: h.Score, Vector: h.Vector, Text: h.Text, Relevance: h.Relevance}
}

// Hits is Hit of each hit, never nil.
func Hits(hs []actors.Hit) []api.Hit { return mapAll(hs, Hit) }

// Job is a job row as an inspect report lists it.
func Job(j persistence.Job) api.Job {
	return api.Job{Type: string(j.Type), Branch: j.Branch, Turn: j.Turn, Attempts: j.Attempts, Created: j.Created}
}

// Report is an inspect report as the API answers it. Its lists stay nil
// where the runtime's are.
func Report(r actors.Report) api.Report {
	out := api.Report{DataDir: r.DataDir, Sessions: mapNil(r.Sessions, reportSession), Jobs: mapNil(r.Jobs, Job)}
	return out
}

func reportSession(s actors.ReportSession) api.ReportSession {
	return api.ReportSession{Session: Session(s.SessionRow), Branches: mapNil(s.Branches, reportBranch)}
}

func reportBranch(b actors.ReportBranch) api.ReportBranch {
	return api.ReportBranch{Branch: Branch(b.BranchRow), Head: b.Head, HeadDepth: b.HeadDepth, Turns: b.Turns,
		Pending: b.Pending, Chunks: b.Chunks, Phases: b.Phases, States: mapNil(b.States, reportState),
		LastTurns: mapNil(b.LastTurns, reportTurn)}
}

func reportState(s actors.ReportState) api.ReportState {
	return api.ReportState{Seq: s.Seq, ID: s.ID, Turns: s.Turns}
}

func reportTurn(t actors.ReportTurn) api.ReportTurn {
	return api.ReportTurn{Turn: Turn(t.TurnRow), Partial: t.Partial, Torn: t.Torn, Steps: mapNil(t.Steps, reportStep)}
}

func reportStep(s actors.ReportStep) api.ReportStep {
	return api.ReportStep{Index: s.Index, ID: s.ID, Provider: s.Provider, Model: s.Model, Outcome: s.Outcome,
		Items: s.Items, Displayed: s.Displayed, Durable: s.Durable, Estimated: s.Estimated, InputTokens: s.InputTokens,
		CacheReadTokens: s.CacheReadTokens}
}

// ContextDebug is the context debug view as the API answers it.
func ContextDebug(d actors.ContextDebug) api.ContextDebug {
	return api.ContextDebug{Turn: d.Turn, Step: d.Step, Provider: d.Provider, Model: d.Model, Context: d.Context,
		Report: assemblyReport(d.Report), SentHash: d.SentHash, RebuiltHash: d.RebuiltHash, Matches: d.Matches,
		Retrieved: mapNil(d.Retrieved, func(r persistence.RetrievedRef) api.RetrievedRef {
			return api.RetrievedRef{Chunk: r.Chunk, Score: r.Score, Forced: r.Forced}
		}),
		RetrievalError: d.RetrievalError, ClientSystem: d.ClientSystem, Params: d.Params}
}

func assemblyReport(r core.AssemblyReport) api.AssemblyReport {
	b := r.Budget
	return api.AssemblyReport{
		Budget: api.Budget{ContextLimit: b.ContextLimit, ResponseReserve: b.ResponseReserve, SafetyMargin: b.SafetyMargin,
			RetrievalMax: b.RetrievalMax, ChunkMax: b.ChunkMax},
		Sections: mapNil(r.Sections, func(s core.SectionUsage) api.SectionUsage {
			return api.SectionUsage{Name: s.Name, Tokens: s.Tokens, Items: s.Items}
		}),
		Total: r.Total,
		Shrink: mapNil(r.Shrink, func(s core.ShrinkStep) api.ShrinkStep {
			return api.ShrinkStep{Step: s.Step, Detail: s.Detail, Saved: s.Saved, Target: s.Target}
		}),
		Over: r.Over,
		Chunks: mapNil(r.Chunks, func(c core.ChunkUse) api.ChunkUse {
			return api.ChunkUse{Chunk: c.Chunk, Score: c.Score, Tokens: c.Tokens, Summary: c.Summary}
		}),
	}
}

// BranchInfo is the live state info of the branch of row as the API
// answers it (and the TUI on the embedded runtime shows it).
func BranchInfo(row persistence.BranchRow, info actors.BranchInfo) api.BranchInfo {
	out := api.BranchInfo{Branch: Branch(row), Tip: info.Tip, State: info.State, Epoch: info.Epoch, TurnSeq: info.TurnSeq,
		Committed: info.Committed, Failed: info.Failed, Indexed: info.Indexed, Pending: info.Pending, Model: info.Model,
		MemoryTools: info.MemoryTools, MemoryToolsOn: info.MemoryToolsOn}
	if info.InFlight != nil {
		id := info.InFlight.ID
		out.InFlight = &id
	}
	return out
}

// Deleted is what a delete did, as the API answers it (and the CLI and
// chat print it).
func Deleted(res actors.DeleteResult) api.Deleted {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return api.Deleted{Session: res.Session, Branches: res.Branches, Nodes: res.Nodes, Turns: res.Turns,
		Blobs: res.Blobs, Chunks: res.Chunks, Steps: len(res.Steps), Journals: res.Journals, Keys: res.Keys,
		ValueLogPending: res.ValueLogPending, TookMS: ms(res.Took), ScrubMS: ms(res.Scrub)}
}

// HistoryEntry is a message of a branch's history as the API answers
// it, with the output recovered for its reply when a crash cut that off.
func HistoryEntry(e actors.Entry) api.HistoryEntry {
	return api.HistoryEntry{Node: e.Node, Depth: e.Depth, Message: e.Message, PartialReply: partialOutput(e.PartialReply)}
}

// partialOutput is the API form of output recovered after a crash,
// labeled incomplete; nil for nil.
func partialOutput(r *actors.Recovered) *api.PartialOutput {
	if r == nil {
		return nil
	}
	return &api.PartialOutput{Step: r.Step, Text: r.Text, Incomplete: true, Displayed: r.Displayed, Durable: r.Durable}
}

// retentionOut is a session's retention as the API answers it.
func retentionOut(in actors.RetentionInfo) api.Retention {
	out := api.Retention{Session: in.Session, Idle: actors.FormatRetention(in.Idle), Source: in.Source,
		LastActivity: in.LastActivity, InFlight: in.InFlight}
	if in.Own != nil {
		s := actors.FormatRetention(*in.Own)
		out.Own = &s
	}
	if !in.Expires.IsZero() {
		e := in.Expires
		out.Expires = &e
	}
	return out
}

// mapAll is f of each of in, an empty slice (JSON []) for none.
func mapAll[T, U any](in []T, f func(T) U) []U {
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// mapNil is mapAll, but nil (JSON null, or omitted) for nil.
func mapNil[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	return mapAll(in, f)
}

// turnLatency is the API form of a turn's latency, in milliseconds.
func turnLatency(l actors.TurnLatency) api.TurnLatency {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return api.TurnLatency{EmbedMs: ms(l.Embed), SearchMs: ms(l.Search), AssembleMs: ms(l.Assemble),
		StreamMs: ms(l.Stream), SummarizeMs: ms(l.Summarize), IndexMs: ms(l.Index)}
}
