package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/contextinfinity/ctxinf/providers"
)

// streamResponses runs one response of the Responses API with streaming.
// Every stream event is emitted with Type its type
// ("response.output_text.delta"…; "unknown" for an event without one)
// and Raw its JSON:
//
//   - output_text and refusal deltas as EventTextDelta, Index being
//     output_index*TextIndexStride + content_index;
//   - response.output_item.done of a function call, a reasoning item or
//     an item of a kind this package does not know as EventItem with the
//     transcript item (messages.ToolCall, ReasoningItem, UnknownItem);
//   - anything else, known or not, as EventOther.
//
// The response's items are in output order: a message becomes an
// AssistantMessage (its output_text and refusal parts as Text blocks,
// kept apart), a function call a ToolCall (its arguments, however they
// were split, as a JSON string holding the text; the done event's text
// wins over the deltas), reasoning a ReasoningItem, and any other item
// an UnknownItem{Provider: "openai"}; the response id follows as
// Metadata{Key: "response_id"}. RawResponse is the final response
// object.
//
// Outcomes: response.completed is Completed, or Paused{tool_use} when
// the output holds function calls; response.incomplete is Incomplete
// with incomplete_details.reason ("max_output_tokens",
// "content_filter", any other as given); response.failed and an error
// event are Failed with the error's code and message, returning a
// *providers.Error (server_error and rate_limit_exceeded retryable). A
// refusal is kept as the assistant's text and does not change the
// outcome. A stream that ends before one of these fails with a
// retryable *providers.Error.
func (p *Provider) streamResponses(ctx context.Context, req providers.Request, emit func(providers.Event) error) (providers.Response, error) {
	s := newResponsesStream(p.name, emit)
	params, err := p.buildResponsesParams(req)
	if err != nil {
		err = fmt.Errorf("%s: build request: %w", p.name, err)
		return s.fail("bad_request", err), err
	}
	// The body is encoded once, here, and handed to the client as it is
	// (the client would encode params again: a large context's encoding
	// costs more than the rest of the call's own work).
	body, err := json.Marshal(params)
	if err != nil {
		err = fmt.Errorf("%s: encode request: %w", p.name, err)
		return s.fail("bad_request", err), err
	}
	s.rawRequest = body // replaced by the bytes sent, once sent
	if err := ctx.Err(); err != nil {
		return s.cancelled(), err
	}
	capture := &providers.Exchange{}
	// The SDK makes the request (auth, retries, errors); its events are
	// decoded here as responsesEvent (see there).
	var res *http.Response
	reqCtx, cancel := context.WithCancel(ctx) // see heldBody.release
	call := p.client.Responses.NewStreaming(reqCtx, responses.ResponseNewParams{}, option.WithRequestBody("application/json", body),
		option.WithMiddleware(capture.Middleware), option.WithResponseInto(&res))
	stream, ended, release := redecode[responsesEvent](call, res, cancel)
	defer release()
	for stream.Next() {
		end, err := s.event(stream.Current())
		if err != nil {
			s.setRawRequest(capture.Body)
			return s.emitFailed(err)
		}
		if ctx.Err() != nil {
			break // cancelled, maybe by emit: events already read are not waited on
		}
		if end {
			s.setRawRequest(capture.Body)
			ended()
			return s.finish()
		}
	}
	s.setRawRequest(capture.Body)
	if ctx.Err() != nil {
		return s.cancelled(), ctx.Err()
	}
	if err := stream.Err(); err != nil {
		perr := toError(p.name, err, capture.Response)
		return s.fail(providers.OutcomeCode(perr), perr), perr
	}
	ended()
	return s.finish()
}
