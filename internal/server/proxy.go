package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/messages"
)

// The OpenAI-compatible proxy: POST /v1/chat/completions and
// /v1/responses take a request as OpenAI's API does, run its newest user
// message as a turn on a branch of the runtime (assembled context,
// summary, retrieval, journal, against the runtime's model), and answer
// in the API's own format, streaming or not. The conversation is the
// X-Ctx-Branch header (a branch id), or else a key: the X-Ctx-Conversation
// header, the request's "user" (chat), or "conversation" or
// metadata.conversation (responses); a key names a session the proxy
// creates on first use ("proxy:<key>"). Earlier messages of the request
// are ignored: the runtime holds the conversation.

// isProxyPath reports whether path is one of the proxy's routes, whose
// errors are in the OpenAI API's shape (Anthropic's on its Messages API).
func isProxyPath(path string) bool {
	return path == "/v1/chat/completions" || path == "/v1/responses" || path == "/v1/embeddings" || isAnthropicPath(path)
}

// ProxyBranchHeader and ProxyConversationHeader choose the conversation.
const (
	ProxyBranchHeader       = "X-Ctx-Branch"
	ProxyConversationHeader = "X-Ctx-Conversation"
	MaxConversationKey      = 200
)

// proxySessions maps conversation keys to branches, from the sessions
// titled "proxy:<key>".
type proxySessions struct {
	mu     sync.Mutex
	loaded bool
	byKey  map[string]messages.BranchID
	queues proxyQueues
}

func (s *Server) proxyBranch(r *http.Request, key string) (messages.BranchID, error) {
	if h := r.Header.Get(ProxyBranchHeader); h != "" {
		id, err := messages.ParseID[messages.BranchID](h)
		if err != nil {
			return id, invalid("%s: %q is not a branch id", ProxyBranchHeader, h)
		}
		if _, err := s.rt.DB().BranchRow(r.Context(), id); err != nil {
			return id, err
		}
		return id, nil
	}
	if h := r.Header.Get(ProxyConversationHeader); h != "" {
		key = h
	}
	if key == "" {
		return messages.BranchID{}, invalid("no conversation: set the %s or %s header, or the request's user (chat) or conversation (responses)",
			ProxyBranchHeader, ProxyConversationHeader)
	}
	if len(key) > MaxConversationKey {
		return messages.BranchID{}, invalid("conversation: %d bytes, limit %d", len(key), MaxConversationKey)
	}
	ps := &s.proxy
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if !ps.loaded {
		ss, err := s.rt.DB().Sessions(r.Context())
		if err != nil {
			return messages.BranchID{}, err
		}
		ps.byKey = map[string]messages.BranchID{}
		for _, sess := range ss {
			if k, ok := strings.CutPrefix(sess.Title, "proxy:"); ok {
				ps.byKey[k] = sess.ActiveBranch
			}
		}
		ps.loaded = true
	}
	if b, ok := ps.byKey[key]; ok {
		return b, nil
	}
	_, b, err := s.rt.CreateSession(r.Context(), "proxy:"+key)
	if err != nil {
		return messages.BranchID{}, err
	}
	ps.byKey[key] = b.ID
	return b.ID, nil
}

// decodeAPIRequest reads the body of a request to the OpenAI API named
// api into v. Unlike decode it allows fields the proxy does not read: an
// application sends the API's whole request.
func decodeAPIRequest(r *http.Request, v any, api string) error {
	if err := decodeBody(r.Body, v, false, true); err != nil {
		if ae, ok := err.(*apiError); ok && ae.Code == CodeInvalid {
			return invalid("%s (a %s request)", ae.Message, api)
		}
		return err
	}
	return nil
}

// chatRequest is the part of a Chat Completions request the proxy reads.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream        bool            `json:"stream"`
	StreamOptions json.RawMessage `json:"stream_options"`
	User          string          `json:"user"`
}

// contentText is the text of a message content: a string, or the text
// parts of an array of parts.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("want a string or an array of content parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "input_text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// proxyModel is the model a proxied request names, to be selected on its
// branch with its turn (actors.SubmitOptions.Model) when the runtime has
// a model of that name, else "": any other name runs on the branch's
// model.
func (s *Server) proxyModel(model string) string {
	if slices.Contains(s.rt.ModelNames(), model) {
		return model
	}
	return ""
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) error {
	var req chatRequest
	if err := decodeAPIRequest(r, &req, "Chat Completions"); err != nil {
		return err
	}
	text := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			t, err := contentText(req.Messages[i].Content)
			if err != nil {
				return invalid("messages[%d].content: %v", i, err)
			}
			text = t
			break
		}
	}
	if strings.TrimSpace(text) == "" {
		return invalid("messages: no user message with text")
	}
	b, err := s.proxyBranch(r, req.User)
	if err != nil {
		return err
	}
	model := req.Model
	idem, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	st, leave, err := s.proxySubmit(r, b, text,
		actors.SubmitOptions{Within: s.opts.ProxyCommitWithin, Model: s.proxyModel(model), Key: idem})
	if err != nil {
		return err
	}
	defer leave()
	id := "chatcmpl-" + st.Turn.String()
	created := time.Now().Unix()
	w.Header().Set(ProxyBranchHeader, b.String())
	if !req.Stream {
		reply, last := st.Wait(r.Context().Done())
		if err := turnFailed(st.Turn, last); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": finishReason(last),
				"message": map[string]any{"role": "assistant", "content": reply}}},
			"usage": map[string]int{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
		})
		return nil
	}
	// Chunks are encoded by hand (one per token): everything but the
	// delta and the finish reason is the same in each. A chunk is
	// begun with its delta's opening (head, then open), the delta's
	// content appended to buf, and ended with its finish reason.
	head := fmt.Appendf(nil, `{"id":%s,"object":"chat.completion.chunk","created":%d,"model":`,
		messages.AppendJSONString(nil, id), created)
	head = append(messages.AppendJSONString(head, model), `,"choices":[{"index":0,"delta":`...)
	var buf []byte
	begin := func(open string) { buf = append(append(buf[:0], head...), open...) }
	end := func(send func(string, any), finish string) {
		buf = append(buf, `,"finish_reason":`...)
		if finish == "" {
			buf = append(buf, "null"...)
		} else {
			buf = messages.AppendJSONString(buf, finish)
		}
		send("", json.RawMessage(append(buf, "}]}"...)))
	}
	return proxyStream(w, r, st, func(send func(string, any), u actors.Update, first bool) {
		if first {
			begin(`{"role":"assistant","content":""}`)
			end(send, "")
		}
		switch {
		case u.Done:
			if ae := turnFailed(st.Turn, u); ae != nil {
				// openai-go and the other SDKs end a stream with an
				// error at a chunk that holds one.
				send("", map[string]any{"error": map[string]any{"message": ae.Message, "type": openAIErrorType(ae.Status),
					"param": nil, "code": ae.Code}})
				return
			}
			begin("{}")
			end(send, finishReason(u))
		case u.Delta != "":
			begin(`{"content":`)
			buf = append(messages.AppendJSONString(buf, u.Delta), '}')
			end(send, "")
		}
	}, "[DONE]")
}

// responsesRequest is the part of a Responses request the proxy reads.
type responsesRequest struct {
	Model        string            `json:"model"`
	Input        json.RawMessage   `json:"input"`
	Stream       bool              `json:"stream"`
	Conversation json.RawMessage   `json:"conversation"`
	Metadata     map[string]string `json:"metadata"`
	User         string            `json:"user"`
}

// responsesInput is the text of the newest user input: the input string,
// or the last user message of an input list.
func responsesInput(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return "", errors.New("want a string or a list of input items")
	}
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Role == "user" && (items[i].Type == "" || items[i].Type == "message") {
			return contentText(items[i].Content)
		}
	}
	return "", nil
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request) error {
	var req responsesRequest
	if err := decodeAPIRequest(r, &req, "Responses"); err != nil {
		return err
	}
	text, err := responsesInput(req.Input)
	if err != nil {
		return invalid("input: %v", err)
	}
	if strings.TrimSpace(text) == "" {
		return invalid("input: no user text")
	}
	key := req.Metadata["conversation"]
	if len(req.Conversation) > 0 {
		var c string
		var co struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(req.Conversation, &c) == nil {
			key = c
		} else if json.Unmarshal(req.Conversation, &co) == nil {
			key = co.ID
		}
	}
	if key == "" {
		key = req.User
	}
	b, err := s.proxyBranch(r, key)
	if err != nil {
		return err
	}
	model := req.Model
	idem, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	st, leave, err := s.proxySubmit(r, b, text,
		actors.SubmitOptions{Within: s.opts.ProxyCommitWithin, Model: s.proxyModel(model), Key: idem})
	if err != nil {
		return err
	}
	defer leave()
	w.Header().Set(ProxyBranchHeader, b.String())
	respID, msgID := "resp_"+st.Turn.String(), "msg_"+st.Turn.String()
	created := time.Now().Unix()
	response := func(status, reply string, last actors.Update) map[string]any {
		out := map[string]any{"id": respID, "object": "response", "created_at": created, "model": model, "status": status,
			"output": []any{}, "usage": map[string]int{"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}}
		if status != "in_progress" {
			out["output"] = []any{map[string]any{"type": "message", "id": msgID, "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": reply, "annotations": []any{}}}}}
		}
		switch status {
		case "incomplete":
			out["incomplete_details"] = map[string]string{"reason": last.Outcome.Reason}
		case "failed":
			ae := turnFailed(st.Turn, last)
			out["error"] = map[string]string{"code": ae.Code, "message": ae.Message}
			out["output"].([]any)[0].(map[string]any)["status"] = "incomplete"
		}
		return out
	}
	if !req.Stream {
		reply, last := st.Wait(r.Context().Done())
		if err := turnFailed(st.Turn, last); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, response(responseStatus(last), reply, last))
		return nil
	}
	var text2 strings.Builder
	var buf []byte
	seq := 0
	return proxyStream(w, r, st, func(send func(string, any), u actors.Update, first bool) {
		ev := func(typ string, v map[string]any) {
			v["type"], v["sequence_number"] = typ, seq
			seq++
			send(typ, v)
		}
		if first {
			ev("response.created", map[string]any{"response": response("in_progress", "", u)})
			ev("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"type": "message", "id": msgID,
				"role": "assistant", "status": "in_progress", "content": []any{}}})
			ev("response.content_part.added", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
		}
		switch {
		case u.Done && u.Phase == messages.PhaseFailed:
			// As the Responses API ends a response that failed: an
			// error event, then response.failed saying why.
			ae := turnFailed(st.Turn, u)
			ev("error", map[string]any{"code": ae.Code, "message": ae.Message, "param": nil})
			ev("response.failed", map[string]any{"response": response("failed", text2.String(), u)})
		case u.Done:
			all := text2.String()
			ev("response.output_text.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "text": all})
			ev("response.content_part.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": all, "annotations": []any{}}})
			ev("response.output_item.done", map[string]any{"output_index": 0, "item": map[string]any{"type": "message", "id": msgID,
				"role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": all, "annotations": []any{}}}}})
			status := responseStatus(u)
			ev("response."+status, map[string]any{"response": response(status, all, u)})
		case u.Delta != "":
			// By hand: one per token.
			text2.WriteString(u.Delta)
			buf = append(buf[:0], `{"type":"response.output_text.delta","sequence_number":`...)
			buf = strconv.AppendInt(buf, int64(seq), 10)
			seq++
			buf = append(buf, `,"item_id":`...)
			buf = messages.AppendJSONString(buf, msgID)
			buf = append(buf, `,"output_index":0,"content_index":0,"delta":`...)
			buf = messages.AppendJSONString(buf, u.Delta)
			send("response.output_text.delta", json.RawMessage(append(buf, '}')))
		}
	}, "")
}

// proxyStream is sseStream for the proxy's APIs: they carry the turn's
// text only (tool calls and outputs are the runtime's own), and each is
// told whether the update is the first it is given. A turn that fails
// before any text (its context too large, the provider's 401) is
// answered as the API answers a request it refuses: an error status,
// not a stream.
func proxyStream(w http.ResponseWriter, r *http.Request, st *actors.TurnStream,
	each func(send func(event string, v any), u actors.Update, first bool), done string) error {
	us := st.Next(r.Context().Done())
	for _, u := range us {
		if u.Item != nil {
			continue
		}
		if u.Done && u.Phase == messages.PhaseFailed {
			return turnFailed(st.Turn, u)
		}
		break
	}
	started := false
	return sseStream(w, r, st, us, nil, func(send func(string, any), u actors.Update) {
		if u.Item != nil {
			return
		}
		first := !started
		started = true
		each(send, u, first)
	}, done)
}

// sseStream answers with server-sent events: head's (if any), flushed at
// once, then those each builds from every update of the turn (read is
// what was read of the stream already), flushed as they come, then the
// done line if not empty. A client that goes away ends it; the turn goes
// on.
func sseStream(w http.ResponseWriter, r *http.Request, st *actors.TurnStream, read []actors.Update, head func(send func(event string, v any)),
	each func(send func(event string, v any), u actors.Update), done string) error {
	fl, ok := w.(http.Flusher)
	if !ok {
		return errors.New("server: streaming unsupported by the connection")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	send := func(event string, v any) {
		data, ok := v.(json.RawMessage) // encoded by the caller
		if !ok {
			var err error
			if data, err = json.Marshal(v); err != nil {
				// A bug, said as such rather than as an empty event.
				data, _ = json.Marshal(map[string]any{"error": map[string]string{"code": CodeInternal,
					"message": "encode the " + event + " event: " + err.Error()}})
				event = "error"
			}
		}
		if event != "" {
			bw.WriteString("event: ")
			bw.WriteString(event)
			bw.WriteByte('\n')
		}
		bw.WriteString("data: ")
		bw.Write(data)
		bw.WriteString("\n\n")
	}
	flush := func() error {
		if err := bw.Flush(); err != nil {
			return err
		}
		fl.Flush()
		return nil
	}
	if head != nil {
		head(send)
		if flush() != nil {
			return nil
		}
	}
	shown := false // the first text went out on its own
	us := read
	if us == nil {
		us = st.Next(r.Context().Done())
	}
	for ; us != nil; us = st.Next(r.Context().Done()) {
		for _, u := range us {
			each(send, u)
			if !shown && u.Delta != "" {
				// The rest of a batch can wait for the first text.
				shown = true
				if flush() != nil {
					return nil
				}
			}
		}
		if us[len(us)-1].Done {
			break // the last events go with the end of the body
		}
		if flush() != nil {
			return nil // the client went away; the turn goes on
		}
	}
	if done != "" {
		fmt.Fprintf(bw, "data: %s\n\n", done)
	}
	// Not flushed: the server sends the last events with the end of the
	// chunked body when the handler returns, in one write. A client that
	// reads the last event then finds the end of the body too, and keeps
	// its connection for its next request. A client that closes the body
	// at the last event (the OpenAI SDKs do, at [DONE]) before the end of
	// the body has come closes its connection with it.
	_ = bw.Flush()
	return nil
}

func finishReason(u actors.Update) string {
	if u.Outcome.Kind == messages.OutcomeIncomplete {
		return "length"
	}
	return "stop"
}

func responseStatus(u actors.Update) string {
	if u.Outcome.Kind == messages.OutcomeIncomplete {
		return "incomplete"
	}
	return "completed"
}
