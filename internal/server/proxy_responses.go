package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// The Responses API's answers the proxy holds. Each response it answers
// (completed or incomplete, unless the request said "store": false) is
// kept in the tenant's proxy index (persistence.ProxyByResponse) as it
// was answered, before the answer ends, so that the client's next
// request may name its items (an item_reference input item, as the
// Vercel AI SDK sends with store on) and GET /v1/responses/{id} reads
// it back. A deleted conversation's responses go with its branches.

// storeResponse keeps resp, the answer to step of turn on branch, in the
// tenant's index. A response the store cannot take (over its payload
// limit) or a failed write is logged: the answer stands, and a later
// reference to its items is refused as unknown.
func (s *Server) storeResponse(ctx context.Context, branch messages.BranchID, turn messages.TurnID, step int, resp response) {
	data, err := json.Marshal(resp)
	if err == nil {
		e := persistence.ProxyEntry{Tenant: tenantOf(ctx), Kind: persistence.ProxyByResponse,
			Name:        persistence.ProxyResponseName(turn, uint32(step)),
			ProxyTarget: persistence.ProxyTarget{Branch: branch, Turn: turn, Response: data}}
		_, err = s.rt.DB().Commit(context.WithoutCancel(ctx), &persistence.Tx{Proxy: []persistence.ProxyEntry{e}})
	}
	if err != nil {
		s.opts.Log.Warn().Err(err).Str("branch", branch.String()).Str("turn", turn.String()).Int("step", step).
			Msg("proxy: keep the response (its items cannot be referenced)")
	}
}

// heldResponse is the response id names that the tenant's index holds,
// as it was answered; not found (in the API's shape) for any other.
func (s *Server) heldResponse(ctx context.Context, id string) (json.RawMessage, error) {
	turn, step, ok := parseStepID("resp_", id)
	if ok {
		t, err := s.rt.DB().ProxyLookup(ctx, tenantOf(ctx), persistence.ProxyByResponse, persistence.ProxyResponseName(turn, uint32(step)))
		if err == nil {
			return t.Response, nil
		}
		if !errors.Is(err, persistence.ErrProxyNotFound) {
			return nil, err
		}
	}
	return nil, notFound("no response with id %q", id)
}

// getResponse is GET /v1/responses/{response}: a response the proxy
// answered, as it answered it.
func (s *Server) getResponse(w http.ResponseWriter, r *http.Request) error {
	resp, err := s.heldResponse(r.Context(), r.PathValue("response"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(resp, '\n'))
	return nil
}

// itemResponse is the response that gave the output item id: msg_<turn>
// and fc_<turn>_<i> are the items of resp_<turn>, msg_<turn>_<n> and
// fc_<turn>_<n>_<i> those of resp_<turn>_<n>.
func itemResponse(id string) (string, bool) {
	if strings.HasPrefix(id, "fc_") {
		head, i, ok := cutLast(id, "_")
		if _, err := strconv.Atoi(i); !ok || err != nil {
			return "", false
		}
		turn, n, ok := parseStepID("fc_", head)
		return stepID("resp_", turn, n), ok
	}
	turn, n, ok := parseStepID("msg_", id)
	return stepID("resp_", turn, n), ok
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// resolveItemReferences replaces each item reference of a Responses
// request's input ({"type":"item_reference","id"}, or {"id"} alone: the
// type may be left out, as the Go SDK does) by the item it names: an
// output item of a response of the proxy's that the tenant's index
// holds. Any other id is refused, naming input[i].id.
func (s *Server) resolveItemReferences(ctx context.Context, req *responsesRequest) error {
	if len(req.Input) == 0 || req.Input[0] != '[' ||
		!bytes.Contains(req.Input, []byte(`"id"`)) && !bytes.Contains(req.Input, []byte("item_reference")) {
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(req.Input, &items); err != nil {
		return nil // parseResponsesRequest says what is wrong
	}
	held := map[string][]json.RawMessage{} // output items by response id
	changed := false
	for i, raw := range items {
		var ref struct {
			Type string `json:"type"`
			Role string `json:"role"`
			ID   string `json:"id"`
		}
		if json.Unmarshal(raw, &ref) != nil || !(ref.Type == "item_reference" || ref.Type == "" && ref.Role == "" && ref.ID != "") {
			continue
		}
		where := fmt.Sprintf("input[%d].id", i)
		if ref.ID == "" {
			return invalid("%s: required", where)
		}
		unknown := invalid("%s: %q is not an item of a response this proxy holds (msg_… or fc_… of a response answered with store on)",
			where, ref.ID)
		rid, ok := itemResponse(ref.ID)
		if !ok {
			return unknown
		}
		out, ok := held[rid]
		if !ok {
			resp, err := s.heldResponse(ctx, rid)
			if ae := (*apiError)(nil); errors.As(err, &ae) && ae.Code == api.CodeNotFound {
				return unknown
			} else if err != nil {
				return err
			}
			var r struct {
				Output []json.RawMessage `json:"output"`
			}
			if err := json.Unmarshal(resp, &r); err != nil {
				return fmt.Errorf("%w: the response %s the proxy holds: %v", persistence.ErrCorrupt, rid, err)
			}
			out, held[rid] = r.Output, r.Output
		}
		found := false
		for _, it := range out {
			var o struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(it, &o) == nil && o.ID == ref.ID {
				items[i], found, changed = it, true, true
				break
			}
		}
		if !found {
			return unknown
		}
	}
	if changed {
		data, err := json.Marshal(items)
		if err != nil {
			return err
		}
		req.Input = data
	}
	return nil
}
