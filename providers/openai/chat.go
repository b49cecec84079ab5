package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

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
	reqCtx, cancel := context.WithCancel(ctx) // see heldBody.release
	call := p.client.Chat.Completions.NewStreaming(reqCtx, oai.ChatCompletionNewParams{}, option.WithRequestBody("application/json", body),
		option.WithMiddleware(capture.Middleware), option.WithResponseInto(&res))
	stream, ended, release := redecode[chatChunk](call, res, cancel)
	defer release()
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
	ended()
	return s.finish()
}

// redecode is the stream of the response res to a streaming request the
// SDK made (call, which holds its error if it failed), with its events
// decoded as T rather than as the SDK's type. The stream does not close
// the body: the caller calls ended once the stream has ended cleanly,
// and release (deferred) in any case, which closes it (see heldBody).
// cancel cancels the request's context; release calls it last.
func redecode[T, S any](call *ssestream.Stream[S], res *http.Response, cancel context.CancelFunc) (stream *ssestream.Stream[T], ended, release func()) {
	if call.Err() != nil || res == nil {
		return ssestream.NewStream[T](nil, call.Err()), func() {}, func() { _ = call.Close(); cancel() }
	}
	b := &heldBody{body: res.Body, cancel: cancel}
	return ssestream.NewStream[T](ssestream.NewDecoder(&http.Response{Header: res.Header, Body: b}), nil),
		func() { b.ended = true }, b.release
}

// heldBody is a streamed response's body as the SSE decoder sees it: its
// Close does nothing. The decoder closes the body at the event that ends
// the stream ("[DONE]"), and a response body closed before its end closes
// its connection too: unless the end of the chunked body had come with
// that event, the next request to the upstream dialled a new connection
// (over TLS, with a new handshake). The provider releases the body
// instead, once done with the stream.
type heldBody struct {
	body   io.ReadCloser
	cancel context.CancelFunc // the request's context
	ended  bool               // the stream ended cleanly
}

func (b *heldBody) Read(p []byte) (int, error) { return b.body.Read(p) }

func (*heldBody) Close() error { return nil }

// The most a drain reads, and for how long, before the request is given
// up: an upstream that goes on sending after the end of its stream, or
// holds the response open, loses its connection, and costs its turn
// drainFor at most. drainFor is a variable for the tests, which set it
// before any request.
const drainMax = 64 << 10

var drainFor = 20 * time.Millisecond

// release closes the body, after reading it to its end if its stream
// ended cleanly (at most drainMax bytes, for at most drainFor): the end
// of the chunked body follows the last event at once, and the connection
// goes back to the client's pool. A drain that takes too long is cut by
// cancelling the request's context, not by closing the body while it is
// read: since Go 1.27 the transport drains a body closed early itself,
// and a read that reaches the end meanwhile waits for a signal its
// connection's reader no longer sends, for as long as the connection
// lives.
func (b *heldBody) release() {
	if b.ended {
		t := time.AfterFunc(drainFor, b.cancel)
		_, _ = io.CopyN(io.Discard, b.body, drainMax)
		t.Stop()
	}
	_ = b.body.Close()
	b.cancel()
}
