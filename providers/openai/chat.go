package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/contextinfinity/ctxinf/providers"
)

// EventChunk is the Event.Type of every event made from a streamed chat
// completion chunk.
const EventChunk = "chat.completion.chunk"

// EventToolCall is the Event.Type of the EventItem emitted for each tool
// call once its choice has finished; Raw is the item's JSON form.
const EventToolCall = "chat.completion.tool_call"

// streamChat runs one chat completion with streaming. For every chunk it
// emits one EventTextDelta per choice with content (or refusal) text,
// Index being the choice index, or an EventOther when the chunk carries
// no text; Type is EventChunk and Raw the chunk's JSON. When a choice
// finishes with tool calls, an EventItem of type EventToolCall follows
// for each.
//
// The outcome follows the finish reason: "stop" is Completed, "length"
// Incomplete{Reason: "max_output_tokens"}, "content_filter"
// Incomplete{Reason: "content_filter"}, "tool_calls" and "function_call"
// Paused{Reason: "tool_use"}; any other reason is Incomplete with the
// reason as given. A refusal is kept as the assistant's text. A stream
// that ends before a finish reason fails with a retryable
// *providers.Error.
func (p *Provider) streamChat(ctx context.Context, req providers.Request, emit func(providers.Event) error) (providers.Response, error) {
	s := newChatStream(p.name, emit)
	r, err := p.buildChatRequest(req)
	if err != nil {
		err = fmt.Errorf("%s: build request: %w", p.name, err)
		return s.fail("bad_request", err), err
	}
	// The body is encoded here (chatRequest) and handed to the SDK's
	// client as it is.
	body, err := json.Marshal(r)
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
	// decoded here as chatChunk (see there).
	var res *http.Response
	call := p.client.Chat.Completions.NewStreaming(ctx, oai.ChatCompletionNewParams{}, option.WithRequestBody("application/json", body),
		option.WithMiddleware(capture.Middleware), option.WithResponseInto(&res))
	defer call.Close()
	stream := redecode[chatChunk](call, res)
	defer stream.Close()
	for stream.Next() {
		if err := s.chunk(stream.Current()); err != nil {
			s.setRawRequest(capture.Body)
			return s.emitFailed(err)
		}
		if ctx.Err() != nil {
			break // cancelled, maybe by emit: chunks already read are not waited on
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
	return s.finish()
}

// redecode is the stream of the response res to a streaming request the
// SDK made (call, which holds its error if it failed), with its events
// decoded as T rather than as the SDK's type.
func redecode[T, S any](call *ssestream.Stream[S], res *http.Response) *ssestream.Stream[T] {
	if call.Err() != nil || res == nil {
		return ssestream.NewStream[T](nil, call.Err())
	}
	return ssestream.NewStream[T](ssestream.NewDecoder(res), nil)
}
