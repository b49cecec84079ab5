package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// anthropicCountTokens is POST /v1/messages/count_tokens: the tokens of
// the context the runtime would assemble for a Messages request, in
// Anthropic's shape ({"input_tokens": N}). The request is a Messages
// request without max_tokens; the conversation it continues is found as
// the Messages API finds it, without making, importing or forking
// anything (peekConversation). Of a conversation found: the context its
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
	branch, from, found, err := s.peekConversation(r, req.Metadata.UserID, t.msgs)
	if err != nil {
		return err
	}
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

// peekConversation is the conversation findConversation would find for
// a request whose messages are msgs and whose key is key, without
// making, importing or forking anything: the X-Ctx-Branch header's
// branch, the branch of the X-Ctx-Conversation header's key (else key),
// or that of the longest prefix of msgs a reply of the proxy ended, in
// the tenant's index; found is false when there is none (the request
// would start a conversation). from is the index of the first of msgs
// the branch does not hold.
func (s *Server) peekConversation(r *http.Request, key string, msgs []convMessage) (branch messages.BranchID, from int, found bool, err error) {
	ctx := r.Context()
	after := 0
	for i, m := range msgs {
		if m.Role == "assistant" {
			after = i + 1
		}
	}
	if h := r.Header.Get(ProxyBranchHeader); h != "" {
		id, err := messages.ParseID[messages.BranchID](h)
		if err != nil {
			return branch, 0, false, invalid("%s header: %q is not a branch id", ProxyBranchHeader, h)
		}
		if _, err := s.ownBranch(ctx, id); err != nil {
			if ae := (*apiError)(nil); errors.As(err, &ae) && ae.Code == CodeNotFound {
				return branch, 0, false, notFound("%s header: branch %s", ProxyBranchHeader, id)
			}
			return branch, 0, false, err
		}
		return id, after, true, nil
	}
	if h := r.Header.Get(ProxyConversationHeader); h != "" {
		key = h
	}
	db := s.rt.DB()
	if key != "" {
		t, err := db.ProxyLookup(ctx, tenantOf(ctx), persistence.ProxyByKey, []byte(key))
		if errors.Is(err, persistence.ErrProxyNotFound) {
			return branch, 0, false, nil
		}
		return t.Branch, after, err == nil, err
	}
	prefixes := convPrefixes(msgs)
	hashes := make([][32]byte, len(prefixes))
	for i, p := range prefixes {
		hashes[i] = p.hash
	}
	i, t, err := db.ProxyLongestPrefix(ctx, tenantOf(ctx), hashes)
	if err != nil || i < 0 {
		return branch, 0, false, err
	}
	return t.Branch, prefixes[i].end + 1, true, nil
}
