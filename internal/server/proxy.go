package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
)

// The OpenAI-compatible proxy: POST /v1/chat/completions and
// /v1/responses take a request as OpenAI's API does, run its new
// messages on a branch of the runtime (assembled context, summary,
// retrieval, journal, against the runtime's model): a user message as a
// new turn, the results of the client's tool calls as the next step of
// the turn that made them (proxy_request.go, proxy_openai.go). They
// answer in the API's own format, streaming or not. The conversation is
// found from the request (proxy_conv.go): the X-Ctx-Branch header (a
// branch id), a key (the X-Ctx-Conversation header, the request's
// "conversation" or metadata.conversation), a previous response id, or
// the messages the request resends, for its end user ("user").

// isProxyPath reports whether path is the model APIs' (the proxy's):
// any path under /v1/ but the runtime's own resources (nativeRoots),
// served or not (a client probing /v1/completions or /v1/files is told
// in its API's shape that there is none).
func isProxyPath(path string) bool {
	return strings.HasPrefix(path, "/v1/") && !underAny(path, nativeRoots)
}

// isOpenAIPath reports whether path is, or is under, a route of the
// OpenAI API's the proxy serves (openAIRoots).
func isOpenAIPath(path string) bool { return underAny(path, openAIRoots) }

// nativeRoots are the runtime's own resources under /v1/; openAIRoots the
// routes of the OpenAI API's only (/v1/models, shared with Anthropic's,
// is neither).
var (
	nativeRoots = []string{"/v1/sessions", "/v1/branches", "/v1/inspect"}
	openAIRoots = []string{"/v1/chat/completions", "/v1/responses", "/v1/embeddings"}
)

// underAny reports whether path is one of roots or under one.
func underAny(path string, roots []string) bool {
	for _, root := range roots {
		if path == root || strings.HasPrefix(path, root+"/") {
			return true
		}
	}
	return false
}

// ProxyBranchHeader and ProxyConversationHeader choose the conversation.
const (
	ProxyBranchHeader       = "X-Ctx-Branch"
	ProxyConversationHeader = "X-Ctx-Conversation"
	MaxConversationKey      = 200
)

// decodeAPIRequest reads the body of a request to the OpenAI API named
// apiName into v. Unlike decode it allows fields the proxy does not read: an
// application sends the API's whole request.
func decodeAPIRequest(r *http.Request, v any, apiName string) error {
	if err := decodeBody(r.Body, v, false, true); err != nil {
		if ae, ok := err.(*apiError); ok && ae.Code == api.CodeInvalid {
			return invalid("%s (a %s request)", ae.Message, apiName)
		}
		return err
	}
	return nil
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
	started, texted := false, false
	return sseStream(w, r, st, us, nil, func(send func(string, any), u actors.Update) {
		if u.Item != nil {
			return
		}
		if note := stepLimitNote(u, texted); note != "" {
			each(send, actors.Update{Delta: note}, !started) // as the text's end
			started = true
		}
		first := !started
		started, texted = true, texted || u.Delta != ""
		each(send, u, first)
	}, done)
}

// stepLimitNote is the text an answer ends with when its turn went past
// tools.max_steps (Update.StepLimit at its end), said to the client and
// kept in the reply the conversation is found by; "" otherwise. after
// says whether text comes before it.
func stepLimitNote(u actors.Update, after bool) string {
	if !u.Done || u.StepLimit == 0 || u.Phase == messages.PhaseFailed {
		return ""
	}
	note := fmt.Sprintf("[ctxinf: this turn reached tools.max_steps (%d): "+
		"the model's calls of the server's own tools past it were not run]", u.StepLimit)
	if after {
		note = "\n\n" + note
	}
	return note
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
				data, _ = json.Marshal(map[string]any{"error": map[string]string{"code": api.CodeInternal,
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
