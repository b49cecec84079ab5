package contextdebug

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/messages"
)

// Run shows the exact context a turn's model saw (rebuilt from
// the store and checked against what was sent) or the next turn would
// see: sections in order with token counts, the budget arithmetic and the
// shrink steps.
func Run(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("context debug", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	branchFlag := fs.String("branch", "", "branch (required)")
	turnFlag := fs.String("turn", "", "turn number on the branch (default: the next turn)")
	text := fs.String("text", "(your next message)", "with no --turn: the next user message to assemble for")
	asJSON := fs.Bool("json", false, "print one JSON object")
	serverURL := fs.String("server", "", "ask the ctxinf serve at this URL (default: the data directory's, when one runs on it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	branch, err := messages.ParseID[messages.BranchID](*branchFlag)
	if err != nil {
		return fmt.Errorf("context debug: --branch: %w", err)
	}
	var seq uint64
	if *turnFlag != "" {
		var perr error
		if seq, perr = strconv.ParseUint(*turnFlag, 10, 64); perr != nil || seq == 0 {
			return errors.New("context debug: --turn: must be a turn number (1, 2, …; see ctxinf inspect)")
		}
	}
	ctx := context.Background()
	var d actors.ContextDebug
	var rt *ctxinf.Runtime
	if *serverURL == "" {
		rt, err = e.OpenRuntime(ctx)
	}
	switch {
	case rt != nil:
		defer rt.Close()
		if seq == 0 {
			d, err = rt.DebugNextContext(ctx, branch, *text)
			break
		}
		row, rerr := rt.TurnAt(ctx, branch, seq)
		if rerr != nil {
			return fmt.Errorf("context debug: --turn: %w", rerr)
		}
		d, err = rt.DebugContext(ctx, branch, row.ID)
	default:
		c, rerr := e.Remote(*serverURL, err)
		if rerr != nil {
			return rerr
		}
		var raw json.RawMessage
		if seq == 0 {
			raw, err = c.NextContext(ctx, branch, *text)
		} else {
			raw, err = c.ContextOfTurn(ctx, branch, seq)
		}
		if err == nil {
			err = json.Unmarshal(raw, &d)
		}
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	}
	writeContextDebug(e.Stdout, branch, d)
	return nil
}

// writeContextDebug writes d as text: the turn and its model, the budget
// arithmetic, the sections, the retrieved chunks and shrink steps, then
// the context in order (the system prompt first: an API client's in
// full, then the runtime's instructions), and what the model was given
// with it: the tools offered, the tool mode and choice, and the client's
// generation settings.
func writeContextDebug(w io.Writer, branch messages.BranchID, d actors.ContextDebug) {
	if d.Turn.IsZero() {
		fmt.Fprintf(w, "next turn of branch %s · %s/%s\n", branch, d.Provider, d.Model)
	} else {
		match := "matches what was sent"
		if !d.Matches {
			match = "DIFFERS from what was sent (config or history changed since?)"
		}
		fmt.Fprintf(w, "turn %s · step %s · %s/%s · rebuilt from the store: %s\n", d.Turn, d.Step, d.Provider, d.Model, match)
	}
	b := d.Report.Budget
	fmt.Fprintf(w, "budget: context limit %d - response reserve %d - safety margin %d = %d input tokens; used %d",
		b.ContextLimit, b.ResponseReserve, b.SafetyMargin, b.Input(), d.Report.Total)
	if d.Report.Over > 0 {
		fmt.Fprintf(w, " (OVER by %d)", d.Report.Over)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "section\ttokens\titems")
	for _, s := range d.Report.Sections {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", s.Name, s.Tokens, s.Items)
	}
	tw.Flush()
	for _, c := range d.Report.Chunks {
		fmt.Fprintf(w, "retrieved chunk %s score %.3f · %d tokens (summary %v)\n", c.Chunk, c.Score, c.Tokens, c.Summary)
	}
	for _, st := range d.Report.Shrink {
		fmt.Fprintf(w, "shrink: %s, %d tokens: %s\n", st.Step, st.Saved, st.Detail)
	}
	c := d.Context
	fmt.Fprintln(w, "--- context, in order ---")
	runtime := c.SystemInstructions
	if d.ClientSystem != "" {
		fmt.Fprintf(w, "[system: the client's]\n%s\n", cli.Indent(d.ClientSystem))
		if rest, ok := strings.CutPrefix(runtime, d.ClientSystem); ok {
			runtime = strings.TrimLeft(rest, "\n")
		}
	}
	if runtime != "" {
		fmt.Fprintf(w, "[system] %s\n", cli.OneLine(runtime, 160))
	}
	for _, p := range c.PinnedFacts {
		fmt.Fprintf(w, "[pinned] %s\n", p)
	}
	if c.Summary != "" {
		fmt.Fprintf(w, "[summary]\n%s\n", cli.Indent(c.Summary))
	}
	for _, m := range c.Window {
		fmt.Fprintf(w, "[window %s] %s\n", m.Role, cli.OneLine(m.RenderedText, 160))
	}
	for _, m := range c.Pending {
		fmt.Fprintf(w, "[pending %s] %s\n", m.Role, cli.OneLine(m.RenderedText, 160))
	}
	for _, ch := range c.Retrieved {
		fmt.Fprintf(w, "[retrieved %s] %s\n", ch.Chunk, cli.OneLine(ch.Text, 160))
	}
	fmt.Fprintf(w, "[user] %s\n", cli.OneLine(c.User.RenderedText, 160))
	fmt.Fprintln(w, "--- given with it ---")
	mode, choice := string(c.ToolMode), c.ToolChoice.Mode
	if mode == "" {
		mode = "disabled"
	}
	if choice == "" {
		choice = "the model's (auto)"
	} else if c.ToolChoice.Name != "" {
		choice += " " + c.ToolChoice.Name
	}
	fmt.Fprintf(w, "tools: %d (mode %s, choice %s)\n", len(c.Tools), mode, choice)
	for _, t := range c.Tools {
		fmt.Fprintf(w, "[tool %s] %s\n", t.Name, cli.OneLine(t.Description, 120))
		if len(t.InputSchema) > 0 {
			fmt.Fprintf(w, "  input: %s\n", cli.OneLine(string(t.InputSchema), 160))
		}
	}
	if !d.Params.IsZero() {
		params, _ := json.Marshal(d.Params)
		fmt.Fprintf(w, "settings: %s\n", params)
	}
}
