package core

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// This file holds a small script language that drives a Branch the way the
// shell does: each line is a command; the events it decides are encoded,
// decoded, applied, and printed with the effects they call for and the
// branch they leave. The golden transcripts in testdata and the command
// table tests are written in it.
//
//	create [branch=B] [session=Se] [parent=B fork_at=T] [tip=R] [state=St] [state_seq=N]
//	       [summary="…"] [pinned="…"]… [pins=ID@SEQ,…] [pending=T:R:seq,…] [turn_seq=N]
//	submit T [tools=NAME,…]       (the client's tools, if any)
//	start T S
//	calls T S NAME:ID…            (the step's tool calls)
//	results T ID… [next=S]        (an output for each call ID)
//	end_step T S [mode=enabled|parse_only|disabled] [calls=NAME:ID,…] [outcome=KIND]
//	         [failed=CODE] [too_large=N]   (N: the size retries so far; prints EndStep's decision)
//	run_calls T [mode=…] [max=N]  (prints RunCalls' decision for the runtime's open calls)
//	shrink_due T [target=N] [asked=N]   (prints ShrinkDue's decision)
//	finalize T S R completed|incomplete|paused|failed|cancelled [displayed=N] [durable=N]
//	fail T [reason…]             (the rest of the line; "" for none)
//	commit SEQ T… epoch=N [state=St] [summary="…"] [pinned="…"]…   (pinned defaults to the head's)
//	index T [chunks=N]
//	pin "fact" | pin bytes=N      (a fact of N bytes) [max_pins=N] [max_bytes=N]
//	unpin ID
//	edit ID "fact" [max_bytes=N]
//	memory_tools default|on|off   (the branch's memory tools setting; create takes memory_tools= too)
//	pins_at SEQ                   (prints PinsAt(SEQ); no events)
//	recover                       (Recover, then apply its events)
//	crash                         (a restart: replay the log on a fresh branch)
//	reset                         (start over with a fresh branch and log)
//
// Names stand for fixed ids (see id); the clock starts at t0 and advances
// one second per command.

// t0 is the start of the scripts' clock.
var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// idNames maps the text of every id made by id back to its name.
var idNames sync.Map

// id returns the fixed id named name: the first 16 bytes of its SHA-256.
func id[T ~[16]byte](name string) T {
	sum := sha256.Sum256([]byte(name))
	var v T
	copy(v[:], sum[:])
	idNames.Store(messages.ID[struct{}](v).String(), name)
	return v
}

// name returns the name of an id made by id, "-" for the zero id.
func name[K any](v messages.ID[K]) string {
	if v.IsZero() {
		return "-"
	}
	if n, ok := idNames.Load(v.String()); ok {
		return n.(string)
	}
	return v.String()
}

// unname replaces the ids in s by their names.
func unname(s string) string {
	var pairs []string
	idNames.Range(func(k, v any) bool {
		pairs = append(pairs, k.(string), v.(string))
		return true
	})
	return strings.NewReplacer(pairs...).Replace(s)
}

// script is a Branch driven by script lines, with its event log.
type script struct {
	t     testing.TB
	b     Branch
	log   []messages.BranchEvent
	clock time.Time
}

func newScript(t testing.TB) *script { return &script{t: t, clock: t0} }

// run executes lines and fails the test on the first error.
func (s *script) run(lines ...string) *script {
	s.t.Helper()
	for _, line := range lines {
		if _, err := s.exec(line); err != nil {
			s.t.Fatalf("%s: %v", line, err)
		}
	}
	return s
}

// exec executes one line and returns what it prints; a command the branch
// rejects prints its error and returns a nil error.
func (s *script) exec(line string) ([]string, error) {
	s.t.Helper()
	words, args, err := tokenize(line)
	if err != nil {
		return nil, err
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("empty command")
	}
	s.clock = s.clock.Add(time.Second)
	before := cloneBranch(&s.b)
	var out []string
	var events []messages.BranchEvent
	switch cmd, words := words[0], words[1:]; cmd {
	case "reset":
		s.b, s.log = Branch{}, nil
		return []string{"a fresh branch"}, nil
	case "crash":
		replayed, err := replay(s.log)
		if err != nil {
			return nil, err
		}
		s.b = replayed
		return []string{fmt.Sprintf("replayed %d events", len(s.log))}, nil
	case "pins_at":
		n, err := strconv.ParseUint(strings.Join(words, ""), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: pins_at: %v", errScript, err)
		}
		return []string{"pins at " + strconv.FormatUint(n, 10) + ": " + formatPins(s.b.PinsAt(n))}, nil
	case "recover":
		var effects []Effect
		events, effects = s.b.Recover(s.clock)
		if !reflect.DeepEqual(&s.b, before) {
			return nil, fmt.Errorf("recover changed the branch")
		}
		for _, e := range effects {
			out = append(out, "resume "+formatEffect(e))
		}
	case "end_step", "run_calls", "shrink_due":
		e, ok, err := s.decision(cmd, words, args)
		if err != nil {
			return nil, err
		}
		if !reflect.DeepEqual(&s.b, before) {
			return nil, fmt.Errorf("%s changed the branch", cmd)
		}
		if !ok {
			return []string{"decide nothing"}, nil
		}
		return []string{"decide " + formatEffect(e)}, nil
	default:
		events, err = s.decide(cmd, words, args)
		if err != nil && !errors.Is(err, errScript) {
			if len(events) > 0 {
				return nil, fmt.Errorf("%s returned events %v with error %v", cmd, events, err)
			}
			if !reflect.DeepEqual(&s.b, before) {
				return nil, fmt.Errorf("%s changed the branch and failed: %v", cmd, err)
			}
			return []string{"error: " + unname(err.Error())}, nil
		}
		if err != nil {
			return nil, err
		}
		if !reflect.DeepEqual(&s.b, before) {
			return nil, fmt.Errorf("%s changed the branch", cmd)
		}
	}
	if len(events) == 0 {
		return append(out, "no events"), nil
	}
	for _, ev := range events {
		// Persist, then apply what was persisted.
		data, err := messages.MarshalBranchEvent(ev)
		if err != nil {
			return nil, err
		}
		stored, err := messages.UnmarshalBranchEvent(data)
		if err != nil {
			return nil, err
		}
		if !reflect.DeepEqual(stored, ev) {
			return nil, fmt.Errorf("event %s decodes as %+v, want %+v", data, stored, ev)
		}
		effects, err := s.b.Apply(stored)
		if err != nil {
			return nil, fmt.Errorf("apply %+v: %w", ev, err)
		}
		s.log = append(s.log, stored)
		out = append(out, "event "+formatEvent(ev))
		for _, e := range effects {
			out = append(out, "effect "+formatEffect(e))
		}
	}
	if err := checkBranch(&s.b, s.log); err != nil {
		return nil, err
	}
	return append(out, formatBranch(&s.b)...), nil
}

// errScript marks an error in the script itself rather than the branch.
var errScript = errors.New("script")

func (s *script) decide(cmd string, words []string, args map[string]string) ([]messages.BranchEvent, error) {
	need := func(n int) error {
		if len(words) < n {
			return fmt.Errorf("%w: %s needs %d arguments", errScript, cmd, n)
		}
		return nil
	}
	num := func(key string, def uint64) uint64 {
		if v, ok := args[key]; ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				s.t.Fatalf("%s=%q: %v", key, v, err)
			}
			return n
		}
		return def
	}
	b, now := &s.b, s.clock
	switch cmd {
	case "create":
		ev := messages.BranchCreated{
			Session: id[messages.SessionID](or(args["session"], "Se1")),
			Branch:  id[messages.BranchID](or(args["branch"], "B1")),
			TurnSeq: num("turn_seq", 0),
			At:      now,
		}
		if v := args["parent"]; v != "" {
			ev.Parent = id[messages.BranchID](v)
		}
		if v := args["fork_at"]; v != "" {
			ev.ForkAt = id[messages.NodeID](v)
		}
		if v := args["tip"]; v != "" {
			ev.Tip = id[messages.NodeID](v)
		}
		if v := args["state"]; v != "" {
			ev.State.ID = id[messages.StateID](v)
		}
		ev.State.Seq, ev.State.Summary = num("state_seq", 0), args["summary"]
		ev.State.Pinned = pinnedArgs(args)
		if v := args["pins"]; v != "" { // ID@SEQ,… for the pinned facts, in order
			for i, p := range strings.Split(v, ",") {
				var pf messages.PinnedFact
				if _, err := fmt.Sscanf(p, "%d@%d", &pf.ID, &pf.Seq); err != nil || i >= len(ev.State.Pinned) {
					return nil, fmt.Errorf("%w: pins %q: want ID@SEQ for each pinned fact", errScript, p)
				}
				pf.Fact, pf.At = ev.State.Pinned[i], now
				ev.Pins = append(ev.Pins, pf)
			}
		}
		if v := args["pending"]; v != "" {
			for _, p := range strings.Split(v, ",") {
				f := strings.Split(p, ":")
				if len(f) != 3 {
					return nil, fmt.Errorf("%w: pending %q: want T:R:seq", errScript, p)
				}
				seq, err := strconv.ParseUint(f[2], 10, 64)
				if err != nil {
					return nil, fmt.Errorf("%w: pending %q: %v", errScript, p, err)
				}
				ev.Pending = append(ev.Pending, messages.PendingTurn{Turn: id[messages.NodeID](f[0]), Seq: seq, Reply: id[messages.NodeID](f[1])})
			}
		}
		if v, ok := args["memory_tools"]; ok {
			ev.MemoryTools = messages.MemoryTools(v) // as given: the branch checks it
		}
		return b.Create(ev)
	case "submit":
		if err := need(1); err != nil {
			return nil, err
		}
		var c Client
		if v := args["tools"]; v != "" {
			for _, n := range strings.Split(v, ",") {
				c.Tools = append(c.Tools, messages.Tool{Name: n})
			}
		}
		return b.SubmitFor(id[messages.TurnID](words[0]), c, now)
	case "calls":
		if err := need(3); err != nil {
			return nil, err
		}
		calls, err := parseCalls(words[2:])
		if err != nil {
			return nil, err
		}
		return b.IssueToolCalls(id[messages.TurnID](words[0]), id[messages.StepID](words[1]), calls, now)
	case "results":
		if err := need(2); err != nil {
			return nil, err
		}
		var outs messages.Items
		for _, w := range words[1:] {
			outs = append(outs, messages.ToolOutput{CallID: w, Output: []byte(`"ok"`)})
		}
		var next messages.StepID
		if v := args["next"]; v != "" {
			next = id[messages.StepID](v)
		}
		return b.RecordToolResults(id[messages.NodeID](words[0]), outs, next, now)
	case "record":
		if err := need(2); err != nil {
			return nil, err
		}
		return b.Record(id[messages.NodeID](words[0]), id[messages.NodeID](words[1]), now)
	case "start":
		if err := need(2); err != nil {
			return nil, err
		}
		return b.Start(id[messages.TurnID](words[0]), id[messages.StepID](words[1]), now)
	case "finalize":
		if err := need(4); err != nil {
			return nil, err
		}
		var o messages.StepOutcome
		if err := o.Kind.UnmarshalText([]byte(words[3])); err != nil {
			return nil, fmt.Errorf("%w: %v", errScript, err)
		}
		return b.Finalize(id[messages.TurnID](words[0]), id[messages.StepID](words[1]), id[messages.TurnID](words[2]),
			o, num("displayed", 0), num("durable", 0), now)
	case "fail":
		if err := need(1); err != nil {
			return nil, err
		}
		return b.Fail(id[messages.TurnID](words[0]), "", strings.Join(words[1:], " "), now)
	case "commit":
		if err := need(1); err != nil {
			return nil, err
		}
		seq, err := strconv.ParseUint(words[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: commit seq: %v", errScript, err)
		}
		state := messages.StateCheckpoint{
			ID:      id[messages.StateID](or(args["state"], "St"+words[0])),
			Seq:     seq,
			Summary: or(args["summary"], "summary "+words[0]),
			Pinned:  slices.Clone(b.State.Pinned),
		}
		if _, ok := args["pinned"]; ok {
			state.Pinned = pinnedArgs(args)
		}
		var turns []messages.TurnID
		for _, w := range words[1:] {
			turns = append(turns, id[messages.TurnID](w))
		}
		return b.Commit(state, turns, num("epoch", b.Epoch), now)
	case "index":
		if err := need(1); err != nil {
			return nil, err
		}
		return b.MarkIndexed(id[messages.TurnID](words[0]), int(num("chunks", 1)), now)
	case "memory_tools":
		if err := need(1); err != nil {
			return nil, err
		}
		m := messages.MemoryTools(words[0])
		if words[0] == "default" {
			m = messages.MemoryToolsDefault
		}
		return b.SelectMemoryTools(m, now)
	case "pin":
		fact := strings.Join(words, " ")
		if _, ok := args["bytes"]; ok {
			fact = strings.Repeat("x", int(num("bytes", 0)))
		}
		return b.Pin(fact, PinLimits{MaxPins: int(num("max_pins", 0)), MaxBytes: int(num("max_bytes", 0))}, now)
	case "unpin":
		if err := need(1); err != nil {
			return nil, err
		}
		n, err := strconv.ParseUint(words[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: unpin %q: %v", errScript, words[0], err)
		}
		return b.Unpin(n, now)
	case "edit":
		if err := need(1); err != nil {
			return nil, err
		}
		n, err := strconv.ParseUint(words[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: edit %q: %v", errScript, words[0], err)
		}
		return b.EditPin(n, strings.Join(words[1:], " "), PinLimits{MaxBytes: int(num("max_bytes", 0))}, now)
	}
	return nil, fmt.Errorf("%w: unknown command %q", errScript, cmd)
}

// decision runs one of the branch's decisions that record nothing
// (EndStep, RunCalls, ShrinkDue) and returns the effect it calls for.
func (s *script) decision(cmd string, words []string, args map[string]string) (Effect, bool, error) {
	if len(words) < 1 {
		return nil, false, fmt.Errorf("%w: %s needs a turn", errScript, cmd)
	}
	turn := id[messages.TurnID](words[0])
	num := func(key string) int {
		n, _ := strconv.Atoi(args[key])
		return n
	}
	mode := messages.ToolMode(or(args["mode"], string(messages.ToolsEnabled)))
	if mode == "disabled" {
		mode = messages.ToolsDisabled
	}
	switch cmd {
	case "end_step":
		if len(words) < 2 {
			return nil, false, fmt.Errorf("%w: end_step needs a turn and a step", errScript)
		}
		e := StepEnd{Turn: turn, Step: id[messages.StepID](words[1])}
		if v := args["failed"]; v != "" {
			e.Failed, e.Code, e.Reason = true, v, "the step failed: "+v
			if _, ok := args["too_large"]; ok {
				e.TooLarge, e.SizeRetries = true, num("too_large")
			}
		} else {
			if err := e.Outcome.Kind.UnmarshalText([]byte(or(args["outcome"], "completed"))); err != nil {
				return nil, false, fmt.Errorf("%w: %v", errScript, err)
			}
			e.Items = messages.Items{messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: "…"}}}}
			if v := args["calls"]; v != "" {
				calls, err := parseCalls(strings.Split(v, ","))
				if err != nil {
					return nil, false, err
				}
				e.Items = append(e.Items, calls...)
			}
		}
		eff := s.b.EndStep(e, mode)
		return eff, eff != nil, nil
	case "run_calls":
		t, ok := s.b.Turn(turn)
		if !ok {
			return nil, false, nil
		}
		runtime, _ := t.splitCalls(t.OpenCalls())
		eff := s.b.RunCalls(RunTools{Turn: turn, Step: t.Step, Calls: runtime}, mode, or2(num("max"), 8))
		return eff, eff != nil, nil
	case "shrink_due":
		rep := AssemblyReport{Shrink: []ShrinkStep{{Step: StepShrinkSummary, Target: or2(num("target"), 100)}}}
		eff, ok := s.b.ShrinkDue(turn, rep, uint64(num("asked")))
		return eff, ok, nil
	}
	return nil, false, fmt.Errorf("%w: unknown decision %q", errScript, cmd)
}

// parseCalls reads tool calls written NAME:ID.
func parseCalls(words []string) (messages.Items, error) {
	var calls messages.Items
	for _, w := range words {
		n, callID, ok := strings.Cut(w, ":")
		if !ok {
			return nil, fmt.Errorf("%w: call %q: want NAME:ID", errScript, w)
		}
		calls = append(calls, messages.ToolCall{CallID: callID, Name: n, Arguments: []byte("{}")})
	}
	return calls, nil
}

func or2(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// pinnedArgs returns the values of the pinned= arguments, which tokenize
// joins with "\x00".
func pinnedArgs(args map[string]string) []string {
	v, ok := args["pinned"]
	if !ok || v == "" {
		return nil
	}
	return strings.Split(v, "\x00")
}

// tokenize splits line into words and key=value arguments; words and
// values may be double-quoted Go strings. A repeated key joins its values
// with "\x00".
func tokenize(line string) (words []string, args map[string]string, err error) {
	args = map[string]string{}
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimLeft(line, " \t") {
		key := ""
		if i := strings.IndexAny(line, "= \t\""); i > 0 && line[i] == '=' {
			key, line = line[:i], line[i+1:]
		}
		var tok string
		if strings.HasPrefix(line, `"`) {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %s: %v", errScript, line, err)
			}
			tok, _ = strconv.Unquote(q)
			line = line[len(q):]
		} else {
			i := strings.IndexAny(line, " \t")
			if i < 0 {
				i = len(line)
			}
			tok, line = line[:i], line[i:]
		}
		switch _, seen := args[key]; {
		case key == "":
			words = append(words, tok)
		case seen:
			args[key] += "\x00" + tok
		default:
			args[key] = tok
		}
	}
	return words, args, nil
}

// replay applies log to a fresh branch, as the shell does on restart.
func replay(log []messages.BranchEvent) (Branch, error) {
	var b Branch
	for i, ev := range log {
		if _, err := b.Apply(ev); err != nil {
			return b, fmt.Errorf("replay event %d: %w", i, err)
		}
	}
	return b, nil
}

// cloneBranch returns a deep copy of b.
func cloneBranch(b *Branch) *Branch {
	c := *b
	c.State.Pinned = slices.Clone(b.State.Pinned)
	c.Turns = slices.Clone(b.Turns)
	c.Window = slices.Clone(b.Window)
	return &c
}

// checkBranch checks that b survives a snapshot (a JSON round trip) and
// that replaying log gives b exactly.
func checkBranch(b *Branch, log []messages.BranchEvent) error {
	data, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	var back Branch
	if err := json.Unmarshal(data, &back); err != nil {
		return fmt.Errorf("snapshot %s: %w", data, err)
	}
	if !reflect.DeepEqual(&back, b) {
		return fmt.Errorf("snapshot %s decodes as\n%+v, want\n%+v", data, back, *b)
	}
	replayed, err := replay(log)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(&replayed, b) {
		return fmt.Errorf("replaying %d events gives\n%+v, want\n%+v", len(log), replayed, *b)
	}
	return nil
}

func at(t time.Time) string { return "+" + t.Sub(t0).String() }

func formatEvent(ev messages.BranchEvent) string {
	switch e := ev.(type) {
	case messages.BranchCreated:
		s := fmt.Sprintf("branch_created %s session=%s parent=%s fork_at=%s tip=%s state=%s turn_seq=%d",
			name(e.Branch), name(e.Session), name(e.Parent), name(e.ForkAt), name(e.Tip), formatState(e.State), e.TurnSeq)
		if len(e.Pins) > 0 {
			s += " pins=" + formatPins(e.Pins)
		}
		if len(e.Pending) > 0 {
			var ps []string
			for _, p := range e.Pending {
				ps = append(ps, fmt.Sprintf("%s:%s:%d", name(p.Turn), name(p.Reply), p.Seq))
			}
			s += " pending=" + strings.Join(ps, ",")
		}
		if e.MemoryTools != messages.MemoryToolsDefault {
			s += " memory_tools=" + e.MemoryTools.String()
		}
		return s + " at=" + at(e.At)
	case messages.TurnAccepted:
		return fmt.Sprintf("turn_accepted %s seq=%d state_before=%s at=%s", name(e.Turn), e.Seq, name(e.StateBefore), at(e.At))
	case messages.ResponseStarted:
		return fmt.Sprintf("response_started %s step=%s at=%s", name(e.Turn), name(e.Step), at(e.At))
	case messages.ResponseFinalized:
		return fmt.Sprintf("response_finalized %s step=%s reply=%s outcome=%s displayed=%d durable=%d at=%s",
			name(e.Turn), name(e.Step), name(e.Reply), e.Outcome.Kind, e.Displayed, e.Durable, at(e.At))
	case messages.TurnFailed:
		code := ""
		if e.Code != "" {
			code = " code=" + e.Code
		}
		return fmt.Sprintf("turn_failed %s step=%s%s reason=%q at=%s", name(e.Turn), name(e.Step), code, e.Reason, at(e.At))
	case messages.StateCommitted:
		return fmt.Sprintf("state_committed state=%s turns=%s epoch=%d at=%s", formatState(e.State), names(e.Turns), e.Epoch, at(e.At))
	case messages.TurnIndexed:
		return fmt.Sprintf("turn_indexed %s chunks=%d at=%s", name(e.Turn), e.Chunks, at(e.At))
	case messages.ToolCallsIssued:
		return fmt.Sprintf("tool_calls_issued %s step=%s calls=%s at=%s", name(e.Turn), name(e.Step), formatCalls(e.Items), at(e.At))
	case messages.ToolResultsRecorded:
		return fmt.Sprintf("tool_results_recorded %s outputs=%s next=%s at=%s", name(e.Turn), formatCalls(e.Outputs), name(e.Next), at(e.At))
	case messages.StepRetried:
		return fmt.Sprintf("step_retried %s step=%s next=%s at=%s", name(e.Turn), name(e.Step), name(e.Next), at(e.At))
	case messages.MemoryToolsSelected:
		return fmt.Sprintf("memory_tools_selected %s at=%s", e.Setting, at(e.At))
	case messages.FactPinned:
		return fmt.Sprintf("fact_pinned %s at=%s", short(e.Fact), at(e.At))
	case messages.FactUnpinned:
		return fmt.Sprintf("fact_unpinned %d at=%s", e.Pin, at(e.At))
	case messages.FactEdited:
		return fmt.Sprintf("fact_edited %d %s at=%s", e.Pin, short(e.Fact), at(e.At))
	}
	return fmt.Sprintf("%#v", ev)
}

func formatEffect(e Effect) string {
	switch e := e.(type) {
	case PrepareContext:
		return "prepare_context " + name(e.Turn)
	case Summarize:
		return fmt.Sprintf("summarize %s epoch=%d state=%s", names(e.Turns), e.Epoch, formatState(e.State))
	case Index:
		return "index " + name(e.Turn)
	case TurnDone:
		return fmt.Sprintf("turn_done %s %s", name(e.Turn), e.Phase)
	case RunTools:
		return fmt.Sprintf("run_tools %s step=%s calls=%s", name(e.Turn), name(e.Step), formatCalls(callItems(e.Calls)))
	case AwaitResults:
		return fmt.Sprintf("await_results %s step=%s calls=%s", name(e.Turn), name(e.Step), formatCalls(callItems(e.Calls)))
	case ContinueLoop:
		return fmt.Sprintf("continue_loop %s step=%s", name(e.Turn), name(e.Step))
	case RetryStep:
		return fmt.Sprintf("retry_step %s step=%s", name(e.Turn), name(e.Step))
	case Abandon:
		return fmt.Sprintf("abandon %s reason=%q text=%q", name(e.Turn), e.Reason, e.Text)
	case RetryForSize:
		return fmt.Sprintf("retry_for_size %s step=%s reason=%q", name(e.Turn), name(e.Step), e.Reason)
	case StallForClient:
		return fmt.Sprintf("stall_for_client %s step=%s code=%s reason=%q", name(e.Turn), name(e.Step), e.Code, e.Reason)
	case EndLoop:
		return fmt.Sprintf("end_loop %s step=%s code=%s reason=%q", name(e.Turn), name(e.Step), e.Code, e.Reason)
	case FinalizeStep:
		s := fmt.Sprintf("finalize_step %s step=%s outcome=%s", name(e.Turn), name(e.Step), e.Outcome.Kind)
		if e.Outcome.Reason != "" {
			s += " reason=" + e.Outcome.Reason
		}
		return s
	case IssueCalls:
		return fmt.Sprintf("issue_calls %s step=%s", name(e.Turn), name(e.Step))
	case AnswerCalls:
		return fmt.Sprintf("answer_calls %s step=%s step_limit=%t outputs=%s", name(e.Turn), name(e.Step), e.StepLimit, formatCalls(e.Outputs))
	case AskShrink:
		return fmt.Sprintf("ask_shrink %s epoch=%d summary=%s target=%d", name(e.Turn), e.Epoch, short(e.Summary), e.Target)
	}
	return fmt.Sprintf("%#v", e)
}

// formatCalls writes tool calls as NAME:ID and outputs as ID=OUTPUT.
func formatCalls(items messages.Items) string {
	var out []string
	for _, it := range items {
		switch it := it.(type) {
		case messages.ToolCall:
			out = append(out, it.Name+":"+it.CallID)
		case messages.ToolOutput:
			out = append(out, it.CallID+"="+string(it.Output))
		}
	}
	return "[" + strings.Join(out, " ") + "]"
}

func callItems(calls []messages.ToolCall) messages.Items {
	items := make(messages.Items, len(calls))
	for i, c := range calls {
		items[i] = c
	}
	return items
}

// formatState writes a checkpoint as id#seq, with its pinned facts.
func formatState(s messages.StateCheckpoint) string {
	str := fmt.Sprintf("%s#%d", name(s.ID), s.Seq)
	if len(s.Pinned) > 0 {
		var ps []string
		for _, p := range s.Pinned {
			ps = append(ps, short(p))
		}
		str += "[" + strings.Join(ps, " ") + "]"
	}
	return str
}

// short quotes s, eliding the middle of a long one.
func short(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%q…(%d bytes)", s[:20], len(s))
	}
	return strconv.Quote(s)
}

func names[K any](ids []messages.ID[K]) string {
	var ns []string
	for _, v := range ids {
		ns = append(ns, name(v))
	}
	return "[" + strings.Join(ns, " ") + "]"
}

// formatBranch describes b in a few compact lines.
func formatBranch(b *Branch) []string {
	out := []string{fmt.Sprintf("branch %s tip=%s head=%s epoch=%d turn_seq=%d committed=%d failed=%d indexed=%d events=%d",
		name(b.ID), name(b.Tip), formatState(b.State), b.Epoch, b.TurnSeq, b.Committed, b.Failed, b.Indexed, b.Events)}
	if len(b.Turns) > 0 {
		var ts []string
		for _, t := range b.Turns {
			s := fmt.Sprintf("%s#%d %s", name(t.ID), t.Seq, t.Phase)
			if !t.Step.IsZero() {
				s += " step=" + name(t.Step)
			}
			if !t.Reply.IsZero() {
				s += " reply=" + name(t.Reply)
			}
			if !t.StateAfter.IsZero() {
				s += " after=" + name(t.StateAfter)
			}
			if t.MemoryTools != messages.MemoryToolsDefault {
				s += " memory_tools=" + t.MemoryTools.String()
			}
			ts = append(ts, s)
		}
		out = append(out, "  turns: "+strings.Join(ts, ", "))
	}
	if len(b.Window) > 0 {
		out = append(out, "  window: "+names(b.Window))
	}
	if len(b.Pins) > 0 {
		var ps []string
		for _, p := range b.Pins {
			s := fmt.Sprintf("%d=%s@%d", p.ID, short(p.Fact), p.Seq)
			if p.Ended {
				s += fmt.Sprintf("..%d", p.Until)
			}
			ps = append(ps, s)
		}
		out = append(out, fmt.Sprintf("  pins: pin_seq=%d %s", b.PinSeq, strings.Join(ps, " ")))
	}
	if b.MemoryTools != messages.MemoryToolsDefault {
		out = append(out, "  memory_tools: "+b.MemoryTools.String())
	}
	return out
}

// formatPins writes pins as id=fact@seq.
func formatPins(pins []messages.PinnedFact) string {
	var ps []string
	for _, p := range pins {
		ps = append(ps, fmt.Sprintf("%d=%s@%d", p.ID, short(p.Fact), p.Seq))
	}
	return "[" + strings.Join(ps, " ") + "]"
}
