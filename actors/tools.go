package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// Tool is a function the model may call (SRD §12). Call gets the
// arguments the model wrote, as a JSON object, and returns the output the
// model reads next. An error is given to the model as an error output,
// not a failure of the turn. Call must honour ctx: it is cancelled when
// the turn is, and when the runtime's per-call timeout passes.
type Tool interface {
	Definition() messages.Tool
	Call(ctx context.Context, arguments json.RawMessage) (string, error)
}

// ToolFunc makes a Tool of a definition and a function.
func ToolFunc(def messages.Tool, call func(ctx context.Context, arguments json.RawMessage) (string, error)) Tool {
	return funcTool{def: def, call: call}
}

type funcTool struct {
	def  messages.Tool
	call func(context.Context, json.RawMessage) (string, error)
}

func (t funcTool) Definition() messages.Tool { return t.def }
func (t funcTool) Call(ctx context.Context, args json.RawMessage) (string, error) {
	return t.call(ctx, args)
}

// toolName is what both OpenAI and Anthropic accept as a tool name.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ToolRegistry holds the tools a runtime offers, by name. It is safe for
// concurrent use; tools registered while turns run are offered from the
// next provider step on.
type ToolRegistry struct {
	mu    sync.RWMutex
	tools map[string]Tool
}

// NewToolRegistry returns a registry holding tools; it fails as Register
// does.
func NewToolRegistry(tools ...Tool) (*ToolRegistry, error) {
	r := &ToolRegistry{tools: map[string]Tool{}}
	for _, t := range tools {
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds t. Its name must be 1 to 64 letters, digits, '_' or '-',
// not taken already, and its input schema, when set, a JSON object.
func (r *ToolRegistry) Register(t Tool) error {
	if t == nil {
		return errors.New("tools: register: tool is nil")
	}
	def := t.Definition()
	if !toolName.MatchString(def.Name) {
		return fmt.Errorf("tools: register: name %q: must be 1 to 64 letters, digits, '_' or '-'", def.Name)
	}
	if len(def.InputSchema) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(def.InputSchema, &obj); err != nil || obj == nil {
			return fmt.Errorf("tools: register %q: input_schema: must be a JSON object", def.Name)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tools == nil {
		r.tools = map[string]Tool{}
	}
	if _, ok := r.tools[def.Name]; ok {
		return fmt.Errorf("tools: register: name %q: taken already", def.Name)
	}
	r.tools[def.Name] = t
	return nil
}

// Lookup returns the tool named name.
func (r *ToolRegistry) Lookup(name string) (Tool, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Definitions returns the definitions of every tool, sorted by name.
func (r *ToolRegistry) Definitions() []messages.Tool {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	defs := make([]messages.Tool, 0, len(r.tools))
	for _, t := range r.tools {
		defs = append(defs, t.Definition())
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name })
	return defs
}

// toolLookup finds the tool a call names (ToolRegistry.Lookup).
type toolLookup func(name string) (Tool, bool)

// runTools runs calls, concurrently when parallel, each within timeout,
// and returns one output per call in call order. A tool's error, panic or
// timeout, or an unknown tool, gives an error output; cancelling ctx
// gives "cancelled" outputs for the calls not done.
func runTools(ctx context.Context, reg toolLookup, calls []messages.ToolCall, parallel bool, timeout time.Duration) messages.Items {
	outs := make(messages.Items, len(calls))
	run := func(i int) {
		outs[i] = runTool(ctx, reg, calls[i], timeout)
	}
	if !parallel || len(calls) == 1 {
		for i := range calls {
			run(i)
		}
		return outs
	}
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() { run(i) })
	}
	wg.Wait()
	return outs
}

// runTool runs one call.
func runTool(ctx context.Context, reg toolLookup, c messages.ToolCall, timeout time.Duration) (out messages.ToolOutput) {
	out.CallID = c.CallID
	fail := func(format string, args ...any) messages.ToolOutput {
		out.Output, _ = json.Marshal(fmt.Sprintf(format, args...))
		out.IsError = true
		return out
	}
	if err := ctx.Err(); err != nil {
		return fail("error: cancelled before the tool ran")
	}
	t, ok := reg(c.Name)
	if !ok {
		return fail("error: no tool is named %q", c.Name)
	}
	args := providers.ArgumentsObject(c.Arguments)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		text string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- result{err: fmt.Errorf("tool panicked: %v", p)}
			}
		}()
		text, err := t.Call(cctx, args)
		done <- result{text, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-cctx.Done():
		// A tool that ignores its context is left behind: the loop
		// does not wait for it.
		res.err = cctx.Err()
	}
	switch {
	case res.err == nil:
		out.Output, _ = json.Marshal(res.text)
		return out
	case errors.Is(res.err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fail("error: the tool did not return within %s", timeout)
	case ctx.Err() != nil:
		return fail("error: cancelled while the tool ran; it may or may not have taken effect")
	default:
		return fail("error: %v", res.err)
	}
}
