package messages

import (
	"encoding/json"
	"fmt"
	"slices"
)

// AssembledContext is what the model sees for one provider step (SRD
// §5.9): the authoritative input a provider adapter maps to its request.
// Sections are in the order a prompt lays them out.
type AssembledContext struct {
	SystemInstructions string           `json:"system_instructions"`
	PinnedFacts        []string         `json:"pinned_facts,omitempty"`
	Summary            string           `json:"summary,omitempty"`   // the head state's summary
	Window             []Message        `json:"window,omitempty"`    // committed recent messages, oldest first
	Pending            []Message        `json:"pending,omitempty"`   // finalized, uncommitted turns, in order
	Retrieved          []RetrievedChunk `json:"retrieved,omitempty"` // untrusted memory artifacts
	User               Message          `json:"user"`                // the current user message
	// Continuation holds, within a tool loop, the items produced by the
	// earlier steps of this turn (tool calls and their outputs), in order.
	Continuation Items    `json:"continuation,omitempty"`
	Tools        []Tool   `json:"tools,omitempty"`
	ToolMode     ToolMode `json:"tool_mode,omitempty"`
	// ToolChoice is whether and which tool the model must call; the zero
	// value lets the model decide (each API's default).
	ToolChoice ToolChoice `json:"tool_choice,omitzero"`
}

// ToolChoice says whether and which tool the model must call in a step
// that offers tools: Mode "" or "auto" (the model decides), "none" (no
// tool), "required" (some tool), or "tool" (the tool named Name). Each
// adapter maps it to its API's tool_choice.
type ToolChoice struct {
	Mode string `json:"mode,omitempty"`
	Name string `json:"name,omitempty"` // with Mode "tool"
}

// The tool choice modes.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required"
	ToolChoiceTool     = "tool"
)

// RetrievedChunk is one piece of history brought back by retrieval.
type RetrievedChunk struct {
	Chunk      ChunkID `json:"chunk"`
	SourceTurn TurnID  `json:"source_turn"`
	Text       string  `json:"text"`
	Score      float64 `json:"score"`
}

// Tool describes a tool the model may call: its name, what it does and
// the JSON schema of its input.
//
// In JSON the schema is the JSON value it holds:
// {"name":"…","description":"…","input_schema":{"type":"object",…}}.
// Records written before held it as a base64 string of its bytes, which
// still decodes (as does a schema that is not JSON, written so).
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	InputSchema []byte `json:"input_schema,omitempty"`
}

// toolJSON is Tool's JSON form.
type toolJSON struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// MarshalJSON writes the schema as the JSON it holds (a base64 string
// when it is not JSON).
func (t Tool) MarshalJSON() ([]byte, error) {
	out := toolJSON{Name: t.Name, Description: t.Description}
	switch {
	case len(t.InputSchema) == 0:
	case json.Valid(t.InputSchema) && t.InputSchema[0] != '"':
		out.InputSchema = t.InputSchema
	default:
		s, _ := json.Marshal(t.InputSchema) // base64, as []byte encodes
		out.InputSchema = s
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads either form of the schema: a JSON value, or a
// base64 string of its bytes.
func (t *Tool) UnmarshalJSON(data []byte) error {
	var in toolJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	*t = Tool{Name: in.Name, Description: in.Description}
	switch {
	case len(in.InputSchema) == 0 || string(in.InputSchema) == "null":
	case in.InputSchema[0] == '"':
		if err := json.Unmarshal(in.InputSchema, &t.InputSchema); err != nil {
			return fmt.Errorf("input_schema: %w", err)
		}
	default:
		t.InputSchema = slices.Clone([]byte(in.InputSchema))
	}
	return nil
}

// ToolMode is the tools policy (SRD §12.1). The zero value is disabled.
type ToolMode string

// The tool modes.
const (
	ToolsDisabled  ToolMode = ""
	ToolsParseOnly ToolMode = "parse_only"
	ToolsEnabled   ToolMode = "enabled"
)
