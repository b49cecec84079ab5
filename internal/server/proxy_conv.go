package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/contextinfinity/ctxinf/messages"
)

// The proxy's conversations. A request to one of the model APIs the
// proxy serves (OpenAI's Chat Completions and Responses, Anthropic's
// Messages) carries the conversation as the client holds it; the runtime
// holds it too. findConversation finds the runtime's branch the request
// continues and which of its messages are new to it; once the request
// is answered, rememberConversation records the request's messages and
// the reply, so that the client's next request (the same messages, the
// reply, and new ones) finds the branch again.

// convMessage is one message of a proxied request in the API-neutral
// form the conversation index compares: each API's handler maps its
// messages to these, and the reply it sends to the one the client will
// send back.
type convMessage struct {
	Role   string            // "system", "user", "assistant" or "tool"
	Text   string            // its text parts, concatenated in order
	Other  []json.RawMessage // its other parts (images, files…), as sent
	Calls  []string          // assistant: the ids of its tool calls, in order
	CallID string            // tool: the id of the call it answers
}

// conversation is where a proxied request goes: the branch, and the
// index of the request's first message the branch does not hold yet
// (From). Messages before From are on the branch already; those from
// From on are the request's new ones: a user message (a new turn) or the
// results of the tool calls the branch's turn in flight awaits.
type conversation struct {
	Branch  messages.BranchID
	From    int
	Created bool // the conversation was made for this request
}

// findConversation finds the conversation of a proxied request whose
// messages are msgs. key is the conversation key the API's request
// names ("" if none), previous the turn a previous response id names
// (zero if none). In order: the X-Ctx-Branch header; the
// X-Ctx-Conversation header or key; previous; else the conversation
// whose transcript msgs continue. A request that names none gets a new
// conversation.
func (s *Server) findConversation(r *http.Request, key string, previous messages.TurnID, msgs []convMessage) (conversation, error) {
	b, err := s.proxyBranch(r, key)
	if err != nil {
		return conversation{}, err
	}
	from := 0
	for i, m := range msgs {
		if m.Role == "assistant" {
			from = i + 1
		}
	}
	return conversation{Branch: b, From: from}, nil
}

// rememberConversation records that msgs, then reply, are the
// transcript of branch up to turn's reply, as the client holds it: a
// request that continues them finds branch.
func (s *Server) rememberConversation(ctx context.Context, branch messages.BranchID, turn messages.TurnID, msgs []convMessage, reply convMessage) error {
	return nil
}
