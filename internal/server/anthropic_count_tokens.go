package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/contextinfinity/ctxinf/internal/core"
)

// anthropicCountTokens is POST /v1/messages/count_tokens: the tokens of
// the context the runtime would assemble for a Messages request, in
// Anthropic's shape ({"input_tokens": N}). The request is a Messages
// request without max_tokens; the conversation it continues is found as
// the Messages API finds it, without making, importing or forking
// anything (lookupConversation). Of a conversation found: the context its
// next turn gets (the runtime's instructions, pinned facts, summary,
// recent turns, retrieved memory) with the request's new messages as the
// user's, plus the request's system prompt and tools. Of a new one: the
// runtime's instructions, the system prompt, the tools and every
// message, as it would import them. Counted with the runtime's counter
// for the requested model (its estimate, not the upstream's count).
func (s *Server) anthropicCountTokens(w http.ResponseWriter, r *http.Request) error {
	var req anthropicRequest
	if err := decodeAPIRequest(r, &req, "Messages count_tokens"); err != nil {
		return err
	}
	if req.MaxTokens == nil { // count_tokens takes none
		req.MaxTokens = new(int64(1))
	}
	t, err := parseAnthropic(&req)
	if err != nil {
		return err
	}
	conv, found, err := s.lookupConversation(r, convQuery{key: req.Metadata.Conversation, label: req.Metadata.UserID, msgs: t.msgs})
	if err != nil {
		return err
	}
	branch, from := conv.Branch, conv.From
	model := s.proxyModel(req.Model)
	count := func(text string) int { return s.rt.CountTokens(model, text) + core.MessageOverhead }
	n := 0
	if t.client.System != "" {
		n += count(t.client.System)
	}
	for _, tool := range t.client.Tools {
		data, _ := json.Marshal(struct {
			Name        string          `json:"name"`
			Description string          `json:"description,omitempty"`
			InputSchema json.RawMessage `json:"input_schema"`
		}{tool.Name, tool.Description, tool.InputSchema})
		n += count(string(data))
	}
	if found {
		var parts []string
		for _, i := range t.newMessages(from) {
			if text := partsText(t.msgs[i].Text, t.msgs[i].Other); text != "" {
				parts = append(parts, text)
			}
		}
		d, err := s.rt.DebugNextContext(r.Context(), branch, strings.Join(parts, "\n\n"))
		if err != nil {
			return err
		}
		n += d.Report.Total
		w.Header().Set(ProxyBranchHeader, branch.String())
	} else {
		n += count(s.rt.SystemInstructions())
		for _, m := range t.msgs {
			if m.Role != "system" {
				n += count(partsText(m.Text, m.Other))
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": n})
	return nil
}
