package lifecycle

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/internal/golden"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// TestGolden runs the transcripts in testdata (internal/golden). A line
// "> command" drives a core.Branch as the branch actor does (see exec);
// each event the command decides is printed with the rows Tx gives it,
// then applied. With -rewrite the printed lines are written back; review
// the diff.
func TestGolden(t *testing.T) {
	t.Parallel()
	golden.Run(t, func(*testing.T) golden.Exec {
		s := &script{names: map[string]string{}, clock: t0}
		return s.exec
	})
}

// t0 is the start of the scripts' clock, which advances one second per
// command; the rows print their stamps as offsets from it.
var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// script is a branch driven by script lines:
//
//	create [pending=T:R:SEQ,…] [tip=T] [turn_seq=N] [state=St] [state_seq=N] [summary="…"]
//	submit T
//	record T R
//	start T S
//	finalize T S R completed|incomplete|paused
//	fail T CODE REASON…
//	commit T… [state=St] [summary="…"]      (the next state, at the branch's epoch)
//	shrink [state=St] [summary="…"]          (a shrunk head summary: folds no turn)
//	index T [state_seq=N] [summarize_us=M]   (N, M: the state_seq and summarize latency the store holds for T's row)
//	pin FACT…
//	unpin ID
//	edit ID FACT…
//	model NAME
//	recover                                  (Recover's events)
//
// Names (T1, R1, St1, …) stand for fixed ids; B1 is the branch and Se1
// its session.
type script struct {
	b     core.Branch
	names map[string]string // id text → name
	clock time.Time
}

// id returns the fixed id named name: the first 16 bytes of its SHA-256.
func id[T ~[16]byte](s *script, name string) T {
	sum := sha256.Sum256([]byte(name))
	var v T
	copy(v[:], sum[:])
	s.names[messages.ID[struct{}](v).String()] = name
	return v
}

func (s *script) exec(line string) ([]string, error) {
	words, args := split(line)
	if len(words) == 0 {
		return nil, fmt.Errorf("empty command")
	}
	s.clock = s.clock.Add(time.Second)
	now := s.clock
	turn := func(i int) messages.TurnID { return id[messages.TurnID](s, words[i]) }
	need := func(n int) error {
		if len(words) < n+1 {
			return fmt.Errorf("%s: want %d arguments", words[0], n)
		}
		return nil
	}
	var stored Stored
	var evs []messages.BranchEvent
	var err error
	switch cmd := words[0]; cmd {
	case "create":
		ev := messages.BranchCreated{Branch: id[messages.BranchID](s, "B1"), Session: id[messages.SessionID](s, "Se1"), At: now,
			State: messages.StateCheckpoint{ID: id[messages.StateID](s, or(args["state"], "St0")), Summary: args["summary"]}}
		ev.State.Seq, _ = strconv.ParseUint(args["state_seq"], 10, 64)
		ev.TurnSeq, _ = strconv.ParseUint(args["turn_seq"], 10, 64)
		if args["tip"] != "" {
			ev.Tip = id[messages.NodeID](s, args["tip"])
		}
		if p := args["pending"]; p != "" {
			ev.Parent, ev.ForkAt = id[messages.BranchID](s, "B0"), ev.Tip
			for _, f := range strings.Split(p, ",") {
				parts := strings.Split(f, ":")
				if len(parts) != 3 {
					return nil, fmt.Errorf("pending %q: want T:R:SEQ", f)
				}
				seq, _ := strconv.ParseUint(parts[2], 10, 64)
				ev.Pending = append(ev.Pending, messages.PendingTurn{Turn: id[messages.TurnID](s, parts[0]),
					Reply: id[messages.NodeID](s, parts[1]), Seq: seq})
			}
		}
		evs, err = s.b.Create(ev)
	case "submit":
		if err = need(1); err == nil {
			evs, err = s.b.Submit(turn(1), now)
		}
	case "record":
		if err = need(2); err == nil {
			evs, err = s.b.Record(turn(1), turn(2), now)
		}
	case "start":
		if err = need(2); err == nil {
			evs, err = s.b.Start(turn(1), id[messages.StepID](s, words[2]), now)
		}
	case "finalize":
		if err = need(4); err == nil {
			var out messages.StepOutcome
			if err = out.Kind.UnmarshalText([]byte(words[4])); err == nil {
				evs, err = s.b.Finalize(turn(1), id[messages.StepID](s, words[2]), turn(3), out, 0, 0, now)
			}
		}
	case "fail":
		if err = need(3); err == nil {
			evs, err = s.b.Fail(turn(1), words[2], strings.Join(words[3:], " "), now)
		}
	case "commit", "shrink":
		state := messages.StateCheckpoint{ID: id[messages.StateID](s, or(args["state"], fmt.Sprintf("St%d", s.b.State.Seq+1))),
			Seq: s.b.State.Seq + 1, Summary: or(args["summary"], "summary"), Pinned: s.b.State.Pinned}
		if cmd == "shrink" {
			evs, err = s.b.CommitShrunk(state, s.b.Epoch, now)
			break
		}
		var turns []messages.TurnID
		for i := range words[1:] {
			turns = append(turns, turn(i+1))
		}
		evs, err = s.b.Commit(state, turns, s.b.Epoch, now)
	case "index":
		if err = need(1); err == nil {
			stored.StateSeq, _ = strconv.ParseUint(args["state_seq"], 10, 64)
			stored.SummarizeMicros, _ = strconv.ParseInt(args["summarize_us"], 10, 64)
			evs, err = s.b.MarkIndexed(turn(1), 1, now)
		}
	case "pin":
		evs, err = s.b.Pin(strings.Join(words[1:], " "), core.PinLimits{}, now)
	case "unpin", "edit":
		if err = need(1); err != nil {
			break
		}
		n, perr := strconv.ParseUint(words[1], 10, 64)
		if perr != nil {
			return nil, perr
		}
		if cmd == "unpin" {
			evs, err = s.b.Unpin(n, now)
		} else {
			evs, err = s.b.EditPin(n, strings.Join(words[2:], " "), core.PinLimits{}, now)
		}
	case "model":
		if err = need(1); err == nil {
			evs, err = s.b.SelectModel(words[1], now)
		}
	case "recover":
		evs, _ = s.b.Recover(now)
	default:
		return nil, fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		return []string{"error: " + s.unname(err.Error())}, nil
	}
	var out []string
	for _, ev := range evs {
		out = append(out, s.print(ev, Tx(&s.b, ev, now, stored))...)
		if _, err := s.b.Apply(ev); err != nil {
			return nil, fmt.Errorf("apply %T: %w", ev, err)
		}
	}
	if len(out) == 0 {
		out = []string{"no event"}
	}
	return out, nil
}

// print renders ev's type and the parts of tx that are set, one row a
// line, ids by name, stamps as offsets from t0 and empty fields left out.
func (s *script) print(ev messages.BranchEvent, tx *persistence.Tx) []string {
	data, err := messages.MarshalBranchEvent(ev)
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	var head struct{ Type string }
	_ = json.Unmarshal(data, &head)
	out := []string{head.Type}
	v := reflect.ValueOf(*tx)
	for i := range v.NumField() {
		f := v.Field(i)
		if f.IsZero() {
			continue
		}
		name := v.Type().Field(i).Name
		if f.Kind() != reflect.Slice {
			out = append(out, "  "+name+" "+s.render(f.Interface()))
			continue
		}
		for j := range f.Len() {
			out = append(out, "  "+name+" "+s.render(f.Index(j).Interface()))
		}
	}
	if len(out) == 1 {
		out = append(out, "  (no rows)")
	}
	return out
}

var (
	stamp = regexp.MustCompile(`"\d{4}-\d\d-\d\dT[0-9:.]+Z"`)
	unset = regexp.MustCompile(`,?"[A-Za-z_]+":""`) // zero ids and empty strings
)

func (s *script) render(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return "error: " + err.Error()
	}
	text := stamp.ReplaceAllStringFunc(string(data), func(q string) string {
		at, err := time.Parse(time.RFC3339Nano, strings.Trim(q, `"`))
		if err != nil {
			return q
		}
		return fmt.Sprintf(`"+%s"`, at.Sub(t0))
	})
	return s.unname(strings.Replace(unset.ReplaceAllString(text, ""), "{,", "{", 1))
}

// unname replaces the ids in text by their names.
func (s *script) unname(text string) string {
	pairs := make([]string, 0, 2*len(s.names))
	for k, v := range s.names {
		pairs = append(pairs, k, v)
	}
	return strings.NewReplacer(pairs...).Replace(text)
}

// split splits a line into its words and its key=value arguments; a
// value may be double-quoted.
func split(line string) (words []string, args map[string]string) {
	args = map[string]string{}
	for rest := strings.TrimSpace(line); rest != ""; rest = strings.TrimSpace(rest) {
		var word string
		if k, v, ok := strings.Cut(rest, `="`); ok && !strings.Contains(k, " ") {
			end := strings.Index(v, `"`)
			if end < 0 {
				end = len(v)
			}
			args[k] = v[:end]
			rest = v[min(end+1, len(v)):]
			continue
		}
		word, rest, _ = strings.Cut(rest, " ")
		if k, v, ok := strings.Cut(word, "="); ok {
			args[k] = v
			continue
		}
		words = append(words, word)
	}
	return words, args
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
