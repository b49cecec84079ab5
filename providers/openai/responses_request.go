package openai

import (
	"encoding/json"
	"fmt"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/tokens"
)

// buildResponsesParams maps req to the Responses request. The
// parameters SRD §11.2 wants explicit are always sent: max_output_tokens,
// store, truncation, and parallel_tool_calls with the tools. It fails,
// naming the field, when the model is missing, the output bound is not
// positive or the context cannot be mapped.
func (p *Provider) buildResponsesParams(req providers.Request) (responses.ResponseNewParams, error) {
	var params responses.ResponseNewParams
	if err := checkRequest(req); err != nil {
		return params, err
	}
	input, err := responsesInput(req.Context)
	if err != nil {
		return params, err
	}
	tools, err := responsesTools(req.Context)
	if err != nil {
		return params, err
	}
	params.Model = req.Model
	if sys := providers.SystemText(req.Context); sys != "" {
		params.Instructions = param.NewOpt(sys)
	}
	params.Input.OfInputItemList = input
	params.MaxOutputTokens = param.NewOpt(int64(req.MaxOutputTokens))
	params.Store = param.NewOpt(p.store)
	params.Truncation = responses.ResponseNewParamsTruncation(p.truncation)
	if p.reasoning && !p.store {
		params.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
	}
	choice, err := responsesToolChoice(req.Context)
	if err != nil {
		return params, err
	}
	responsesParams(&params, req.Params)
	if len(tools) > 0 {
		params.Tools = tools
		params.ToolChoice = choice
		params.ParallelToolCalls = param.NewOpt(req.ParallelToolCalls)
	}
	return params, nil
}

// responsesToolChoice is the tool_choice of a request for c
// (providers.ToolChoice): "auto", "none", "required", or
// {"type":"function","name":N}; left out (the zero union) when none is
// sent.
func responsesToolChoice(c messages.AssembledContext) (responses.ResponseNewParamsToolChoiceUnion, error) {
	var u responses.ResponseNewParamsToolChoiceUnion
	tc, err := providers.ToolChoice(c)
	switch {
	case err != nil:
		return u, fmt.Errorf("context: %w", err)
	case tc.Mode == "":
	case tc.Mode == messages.ToolChoiceTool:
		u.OfFunctionTool = &responses.ToolChoiceFunctionParam{Name: tc.Name}
	default:
		u.OfToolChoiceMode = param.NewOpt(responses.ToolChoiceOptions(tc.Mode))
	}
	return u, nil
}

// estimateResponses counts with tc the tokens of the JSON of c's
// instructions, input items, tools and tool choice, images counting
// providers.ImageTokens rather than their data.
func (p *Provider) estimateResponses(c messages.AssembledContext, tc tokens.Counter) (int, error) {
	c, images := providers.WithoutImageData(c)
	input, err := responsesInput(c)
	if err != nil {
		return 0, err
	}
	tools, err := responsesTools(c)
	if err != nil {
		return 0, err
	}
	choice, err := responsesToolChoice(c)
	if err != nil {
		return 0, err
	}
	data, err := json.Marshal(struct {
		Instructions string                                     `json:"instructions,omitempty"`
		Input        responses.ResponseInputParam               `json:"input"`
		Tools        []responses.ToolUnionParam                 `json:"tools,omitempty"`
		ToolChoice   responses.ResponseNewParamsToolChoiceUnion `json:"tool_choice,omitzero"`
	}{providers.SystemText(c), input, tools, choice})
	if err != nil {
		return 0, fmt.Errorf("encode: %w", err)
	}
	return tc.Count(string(data)) + images, nil
}

// responsesInput lays c's conversation (providers.Conversation) out as
// input items, in order:
//
//   - a user segment is a user message (see responsesUserContent);
//   - an assistant segment gives, in block order, an assistant message
//     (output_text parts) for each run of text, a function_call for each
//     tool use (arguments from providers.ArgumentsText), a reasoning item
//     for each OpenAI reasoning item that has encrypted content, and an
//     OpenAI item of a kind this package does not know (an Unknown block
//     from "openai") sent back as it came but for its id; other reasoning, images and
//     other providers' unknown blocks are left out;
//   - a results segment gives a function_call_output per result, right
//     after the calls it answers.
//
// Items are sent without their ids: with store false the server has no
// item to refer to.
func responsesInput(c messages.AssembledContext) (responses.ResponseInputParam, error) {
	segs, err := conversation(c)
	if err != nil {
		return nil, err
	}
	input := make(responses.ResponseInputParam, 0, len(segs))
	for _, s := range segs {
		switch s.Kind {
		case providers.SegmentUser:
			input = append(input, responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{
				Type:    responses.EasyInputMessageTypeMessage,
				Role:    responses.EasyInputMessageRoleUser,
				Content: responses.EasyInputMessageContentUnionParam{OfInputItemContentList: responsesUserContent(s.Blocks)},
			}})
		case providers.SegmentAssistant:
			input = appendAssistantItems(input, s.Blocks)
		case providers.SegmentToolResults:
			for _, b := range s.Blocks {
				if r, ok := b.(messages.ToolResult); ok {
					input = append(input, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
						CallID: param.NewOpt(r.ToolUseID),
						Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: param.NewOpt(toolOutputText(r))},
					}})
				}
			}
		}
	}
	return input, nil
}

// responsesUserProvider is the Provider of the unknown blocks that are
// Responses content parts a client sent (the proxy's), sent back as they
// came.
const responsesUserProvider = "openai"

// responsesUserContent is the content of a user message of blocks bs:
// one input_text of its text when it holds text only, as before;
// otherwise, in order, an input_text per text block, an input_image
// (detail auto) per image (providers.ImageURL: its URL, or a data URL),
// and unknown blocks from a Responses client (Provider "openai") as they
// came. A part this API cannot take (an image from a file, a part
// another API's client sent) becomes an input_text saying so
// (providers.UnsupportedPart).
func responsesUserContent(bs messages.Blocks) responses.ResponseInputMessageContentListParam {
	text := func(s string) responses.ResponseInputContentUnionParam {
		return responses.ResponseInputContentUnionParam{OfInputText: &responses.ResponseInputTextParam{Text: s}}
	}
	plain := true
	for _, b := range bs {
		if _, ok := b.(messages.Text); !ok {
			plain = false
			break
		}
	}
	if plain {
		return responses.ResponseInputMessageContentListParam{text(bs.RenderedText())}
	}
	var out responses.ResponseInputMessageContentListParam
	for _, b := range bs {
		switch b := b.(type) {
		case messages.Text:
			if b.Text != "" {
				out = append(out, text(b.Text))
			}
		case messages.Image:
			u, ok := providers.ImageURL(b)
			if !ok {
				out = append(out, text(providers.UnsupportedImage(b)))
				continue
			}
			out = append(out, responses.ResponseInputContentUnionParam{OfInputImage: &responses.ResponseInputImageParam{
				ImageURL: param.NewOpt(u), Detail: responses.ResponseInputImageDetailAuto}})
		case messages.Unknown:
			if raw, ok := ownPart(b, responsesUserProvider); ok {
				out = append(out, param.Override[responses.ResponseInputContentUnionParam](raw))
				continue
			}
			out = append(out, text(providers.UnsupportedPart(providers.UnknownType(b))))
		}
	}
	if len(out) == 0 {
		out = append(out, text(""))
	}
	return out
}

// outputMessage is an assistant message sent back as input, in the form
// the API outputs it.
type outputMessage struct {
	Type    string       `json:"type"` // "message"
	Role    string       `json:"role"` // "assistant"
	Content []outputText `json:"content"`
}

type outputText struct {
	Type        string            `json:"type"` // "output_text"
	Text        string            `json:"text"`
	Annotations []json.RawMessage `json:"annotations"` // always [], as other providers' annotations mean nothing here
}

// reasoningInput is an OpenAI reasoning item sent back by its encrypted
// content.
type reasoningInput struct {
	Type             string            `json:"type"` // "reasoning"
	Summary          []json.RawMessage `json:"summary"`
	EncryptedContent string            `json:"encrypted_content"`
}

// appendAssistantItems appends the items of an assistant segment.
func appendAssistantItems(input responses.ResponseInputParam, bs messages.Blocks) responses.ResponseInputParam {
	var msg *outputMessage
	flush := func() {
		if msg != nil {
			input = append(input, param.Override[responses.ResponseInputItemUnionParam](*msg))
			msg = nil
		}
	}
	for _, b := range bs {
		switch b := b.(type) {
		case messages.Text:
			if b.Text == "" {
				continue
			}
			if msg == nil {
				msg = &outputMessage{Type: "message", Role: "assistant"}
			}
			msg.Content = append(msg.Content, outputText{Type: "output_text", Text: b.Text, Annotations: []json.RawMessage{}})
		case messages.ToolUse:
			flush()
			input = append(input, responses.ResponseInputItemUnionParam{OfFunctionCall: &responses.ResponseFunctionToolCallParam{
				CallID:    b.ToolUseID,
				Name:      b.Name,
				Arguments: providers.ArgumentsText(b.Input),
			}})
		case messages.Reasoning:
			if r, ok := replayReasoning(b); ok {
				flush()
				input = append(input, param.Override[responses.ResponseInputItemUnionParam](r))
			}
		case messages.Unknown:
			if raw, ok := replayUnknown(b); ok {
				flush()
				input = append(input, param.Override[responses.ResponseInputItemUnionParam](raw))
			}
		}
	}
	flush()
	return input
}

// replayReasoning returns the input item of a reasoning block that holds
// an OpenAI reasoning item (Raw's type is "reasoning") with encrypted
// content; ok is false for any other.
func replayReasoning(b messages.Reasoning) (r reasoningInput, ok bool) {
	var raw struct {
		Type             string            `json:"type"`
		Summary          []json.RawMessage `json:"summary"`
		EncryptedContent string            `json:"encrypted_content"`
	}
	if json.Unmarshal(b.Raw, &raw) != nil || raw.Type != "reasoning" {
		return r, false
	}
	enc := raw.EncryptedContent
	if b.EncryptedContent != nil && *b.EncryptedContent != "" {
		enc = *b.EncryptedContent
	}
	if enc == "" {
		return r, false
	}
	if raw.Summary == nil {
		raw.Summary = []json.RawMessage{}
	}
	return reasoningInput{Type: "reasoning", Summary: raw.Summary, EncryptedContent: enc}, true
}

// replayUnknown returns the raw item of an Unknown block made by this
// adapter (Provider "openai") from an output item with a type, without
// its id like every item sent; ok is false for any other.
func replayUnknown(b messages.Unknown) (json.RawMessage, bool) {
	if b.Provider != itemProvider {
		return nil, false
	}
	f, ok := fields(b.Raw)
	if !ok || str(f, "type") == "" {
		return nil, false
	}
	delete(f, "id")
	raw, err := json.Marshal(f)
	return raw, err == nil
}

// responsesTools maps c's tools to function tools (strict false) when
// the tool mode is enabled or parse_only, and to none otherwise.
func responsesTools(c messages.AssembledContext) ([]responses.ToolUnionParam, error) {
	defs, err := toolDefs(c)
	if err != nil || len(defs) == 0 {
		return nil, err
	}
	tools := make([]responses.ToolUnionParam, 0, len(defs))
	for _, d := range defs {
		fn := &responses.FunctionToolParam{Name: d.name, Parameters: d.parameters, Strict: param.NewOpt(false)}
		if d.description != "" {
			fn.Description = param.NewOpt(d.description)
		}
		tools = append(tools, responses.ToolUnionParam{OfFunction: fn})
	}
	return tools, nil
}
