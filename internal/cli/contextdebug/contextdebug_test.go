package contextdebug

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/messages"
)

// The text view shows what the model saw beside the messages: an API
// client's system prompt in full, the runtime's instructions, the tools
// offered with their mode and choice, and the client's settings.
func TestContextDebugText(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_700_000_000_000)
	d := actors.ContextDebug{Turn: messages.NewID[messages.TurnID](now), Step: messages.NewID[messages.StepID](now),
		Provider: "openai", Model: "gpt", Matches: true, ClientSystem: "You are a weather agent.\nAnswer in one line.",
		Params: messages.GenParams{Temperature: new(0.2), Stop: []string{"END"}},
		Context: messages.AssembledContext{SystemInstructions: "You are a weather agent.\nAnswer in one line.\n\nRUNTIME RULES",
			User: messages.NewMessage(messages.RoleUser, messages.Text{Text: "weather in Paris?"}),
			Tools: []messages.Tool{{Name: "grep", Description: "search the history"},
				{Name: "get_weather", Description: "the weather of a city", InputSchema: []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
			ToolMode: messages.ToolsEnabled, ToolChoice: messages.ToolChoice{Mode: messages.ToolChoiceTool, Name: "get_weather"}}}
	var out bytes.Buffer
	writeContextDebug(&out, messages.NewID[messages.BranchID](now), d)
	got := out.String()
	for _, want := range []string{
		"[system: the client's]\n    You are a weather agent.\n    Answer in one line.\n[system] RUNTIME RULES\n",
		"[user] weather in Paris?\n--- given with it ---\ntools: 2 (mode enabled, choice tool get_weather)\n",
		"[tool grep] search the history\n[tool get_weather] the weather of a city\n  input: {\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}\n",
		`settings: {"temperature":0.2,"stop":["END"]}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("context debug text lacks %q:\n%s", want, got)
		}
	}
	// A turn of the runtime's own: its instructions, no tools.
	out.Reset()
	writeContextDebug(&out, messages.NewID[messages.BranchID](now), actors.ContextDebug{Context: messages.AssembledContext{SystemInstructions: "RUNTIME RULES"}})
	if got := out.String(); !strings.Contains(got, "[system] RUNTIME RULES\n") || !strings.Contains(got, "tools: 0 (mode disabled, choice the model's (auto))") ||
		strings.Contains(got, "client's") || strings.Contains(got, "settings:") {
		t.Errorf("a plain turn's text:\n%s", got)
	}
}
