package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// errorOutputPrefix starts the text of a tool result that reports an
// error: OpenAI's tool outputs are plain strings without an error flag.
const errorOutputPrefix = "error: "

// checkRequest checks the parameters both APIs require: a model and a
// positive output bound (SRD §11.2: max_output_tokens is always sent).
func checkRequest(req providers.Request) error {
	if req.Model == "" {
		return errors.New("request: Model is required")
	}
	if req.MaxOutputTokens <= 0 {
		return fmt.Errorf("request: MaxOutputTokens is %d, must be at least 1", req.MaxOutputTokens)
	}
	return nil
}

// conversation returns the segments of c (providers.Conversation) after
// checking what the layout cannot mend: every history message has a
// valid role, and every tool use has an id and a name.
func conversation(c messages.AssembledContext) ([]providers.Segment, error) {
	for i, m := range c.Window {
		if err := checkRole(m.Role); err != nil {
			return nil, fmt.Errorf("context: window[%d].role: %w", i, err)
		}
	}
	for i, m := range c.Pending {
		if err := checkRole(m.Role); err != nil {
			return nil, fmt.Errorf("context: pending[%d].role: %w", i, err)
		}
	}
	segs := providers.Conversation(c)
	for i, s := range segs {
		for j, b := range s.Blocks {
			u, ok := b.(messages.ToolUse)
			if !ok {
				continue
			}
			if u.ToolUseID == "" || u.Name == "" {
				return nil, fmt.Errorf("context: conversation segment %d, block %d: tool use (%q, id %q): tool_use_id and name are required", i, j, u.Name, u.ToolUseID)
			}
		}
	}
	return segs, nil
}

func checkRole(r messages.Role) error {
	if r != messages.RoleUser && r != messages.RoleAssistant {
		return fmt.Errorf("invalid role %v, must be user or assistant", r)
	}
	return nil
}

// toolOutputText is the output string sent for a tool result: its text
// (providers.ResultText), starting with "error: " when the result
// reports an error and does not already say so.
func toolOutputText(r messages.ToolResult) string {
	text := providers.ResultText(r)
	if r.IsError && !strings.HasPrefix(strings.ToLower(strings.TrimSpace(text)), "error") {
		text = errorOutputPrefix + text
	}
	return text
}

// toolDef is a function tool as both APIs define it.
type toolDef struct {
	name, description string
	parameters        map[string]any // the JSON schema of its arguments
}

// toolDefs returns c's tools when the tool mode sends them (enabled or
// parse_only), and none otherwise. A tool without an input schema takes
// an empty object.
func toolDefs(c messages.AssembledContext) ([]toolDef, error) {
	if c.ToolMode != messages.ToolsEnabled && c.ToolMode != messages.ToolsParseOnly {
		return nil, nil
	}
	defs := make([]toolDef, 0, len(c.Tools))
	for i, t := range c.Tools {
		if t.Name == "" {
			return nil, fmt.Errorf("context: tools[%d].name is required", i)
		}
		def := toolDef{name: t.Name, description: t.Description}
		if len(bytes.TrimSpace(t.InputSchema)) > 0 {
			if err := json.Unmarshal(t.InputSchema, &def.parameters); err != nil {
				return nil, fmt.Errorf("context: tools[%d] (%q).input_schema: must be a JSON object: %w", i, t.Name, err)
			}
		}
		if def.parameters == nil {
			def.parameters = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		defs = append(defs, def)
	}
	return defs, nil
}
