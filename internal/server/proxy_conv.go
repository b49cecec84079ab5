package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strings"
	"sync"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
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
// results of the tool calls the branch's turn in flight awaits. In a
// conversation made for the request, From is its last user message: the
// exchanges before it were imported.
type conversation struct {
	Branch  messages.BranchID
	From    int
	Created bool // the conversation was made for this request
	// Named: the request named its conversation (the X-Ctx-Branch
	// header or a key), as its next requests will: its transcript needs
	// no entry in the index (rememberConversation), which saves a
	// durable write per turn.
	Named bool
}

// findConversation finds the conversation of a proxied request whose
// messages are msgs. key is the conversation key the API's request
// names ("" if none), previous the turn a previous response id names
// (zero if none). In order:
//
//   - the X-Ctx-Branch header: that branch;
//   - the X-Ctx-Conversation header, else key: the branch of the key in
//     the proxy's index (persistence.ProxyByKey), or a new conversation
//     for it;
//   - the Idempotency-Key header, when the request was sent before:
//     where it went then;
//   - previous: the branch that ran that turn;
//   - the longest prefix of msgs ending in an assistant message that a
//     reply of the proxy ended (rememberConversation, in a conversation
//     the request did not name): the branch of that reply's turn;
//   - else a new conversation.
//
// All of them are the request's tenant's: a branch of another tenant is
// not found, and the keys, prefixes, turns and request keys are looked
// up in the tenant's index only.
//
// For a branch, a key's existing conversation or previous, From is the
// index after msgs' last assistant message; for a prefix, the index after
// the prefix. A turn found (previous, or a prefix's) that is not its
// branch's latest (the client edited or regenerated from an earlier
// point) is forked there (Runtime.Fork), and the fork is the conversation:
// the branch keeps its own later turns. A new conversation is a session
// titled "proxy conversation" (and the key); the exchanges msgs holds
// before its last user message are imported into it as finished turns
// (importHistory), and From is that last user message's index. The
// exchanges of a prefix's match the branch does not hold (a client that
// made up assistant messages) are imported likewise.
func (s *Server) findConversation(r *http.Request, key string, previous messages.TurnID, msgs []convMessage) (conversation, error) {
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
			return conversation{}, invalid("%s header: %q is not a branch id", ProxyBranchHeader, h)
		}
		if _, err := s.ownBranch(ctx, id); err != nil {
			if ae := (*apiError)(nil); errors.As(err, &ae) && ae.Code == CodeNotFound {
				return conversation{}, notFound("%s header: branch %s", ProxyBranchHeader, id)
			}
			return conversation{}, err
		}
		return conversation{Branch: id, From: after, Named: true}, nil
	}
	field := "conversation key (the request's user, conversation or metadata)"
	if h := r.Header.Get(ProxyConversationHeader); h != "" {
		key, field = h, ProxyConversationHeader+" header"
	}
	if key != "" {
		if len(key) > MaxConversationKey {
			return conversation{}, invalid("%s: %d bytes, limit %d", field, len(key), MaxConversationKey)
		}
		c, err := s.keyedConversation(ctx, key, msgs, after)
		c.Named = true
		return c, err
	}
	idem, err := idempotencyKey(r)
	if err != nil {
		return conversation{}, err
	}
	if idem == "" {
		return s.keylessConversation(ctx, previous, msgs, after)
	}
	// A request sent again under its Idempotency-Key goes where the
	// first went, whatever that made (a new conversation, a fork).
	tenant := tenantOf(ctx)
	unlock := s.proxy.lock(tenant + "\x00\x00" + idem)
	defer unlock()
	db := s.rt.DB()
	t, err := db.ProxyLookup(ctx, tenant, persistence.ProxyByRequest, []byte(idem))
	if err == nil {
		return conversation{Branch: t.Branch, From: after}, nil
	}
	if !errors.Is(err, persistence.ErrProxyNotFound) {
		return conversation{}, err
	}
	c, err := s.keylessConversation(ctx, previous, msgs, after)
	if err != nil {
		return c, err
	}
	e := persistence.ProxyEntry{Tenant: tenant, Kind: persistence.ProxyByRequest, Name: []byte(idem),
		ProxyTarget: persistence.ProxyTarget{Branch: c.Branch}}
	if _, err := db.Commit(ctx, &persistence.Tx{Proxy: []persistence.ProxyEntry{e}}); err != nil {
		return conversation{}, err
	}
	return c, nil
}

// keylessConversation is findConversation for a request that names no
// branch or key: by previous, else by the prefix of msgs.
func (s *Server) keylessConversation(ctx context.Context, previous messages.TurnID, msgs []convMessage, after int) (conversation, error) {
	if !previous.IsZero() {
		b, err := s.turnBranch(ctx, previous)
		if err != nil {
			return conversation{}, err
		}
		if b, err = s.continueAt(ctx, b, previous); err != nil {
			return conversation{}, err
		}
		return conversation{Branch: b, From: after}, nil
	}
	prefixes := convPrefixes(msgs)
	hashes := make([][32]byte, len(prefixes))
	for i, p := range prefixes {
		hashes[i] = p.hash
	}
	i, t, err := s.rt.DB().ProxyLongestPrefix(ctx, tenantOf(ctx), hashes)
	if err != nil {
		return conversation{}, err
	}
	if i < 0 {
		return s.newConversation(ctx, "proxy conversation", msgs)
	}
	b, err := s.continueAt(ctx, t.Branch, t.Turn)
	if err != nil {
		return conversation{}, err
	}
	from := prefixes[i].end + 1
	if from < after { // exchanges the branch does not hold
		if from, err = s.importHistory(ctx, b, msgs, from); err != nil {
			return conversation{}, err
		}
	}
	return conversation{Branch: b, From: from}, nil
}

// keyedConversation is findConversation for a key: its branch, or a new
// conversation entered under it. Requests for one key find or make it
// one at a time (proxyConversations.lock), and the key is entered in the
// index only once its conversation is made (the history imported): a
// crash before leaves a session no key names, never a key naming a
// conversation short of its history, and never two conversations for a
// key (the index keeps the first entry of a key).
func (s *Server) keyedConversation(ctx context.Context, key string, msgs []convMessage, after int) (conversation, error) {
	tenant := tenantOf(ctx)
	unlock := s.proxy.lock(tenant + "\x00" + key)
	defer unlock()
	db := s.rt.DB()
	t, err := db.ProxyLookup(ctx, tenant, persistence.ProxyByKey, []byte(key))
	if err == nil {
		return conversation{Branch: t.Branch, From: after}, nil
	}
	if !errors.Is(err, persistence.ErrProxyNotFound) {
		return conversation{}, err
	}
	c, err := s.newConversation(ctx, "proxy conversation "+key, msgs)
	if err != nil {
		return conversation{}, err
	}
	if t, err = db.ClaimProxyKey(ctx, tenant, key, c.Branch); err != nil {
		return conversation{}, err
	}
	if t.Branch != c.Branch { // another process entered the key first
		return conversation{Branch: t.Branch, From: after}, nil
	}
	return c, nil
}

// newConversation makes a session titled title for msgs, with their
// history imported (importHistory).
func (s *Server) newConversation(ctx context.Context, title string, msgs []convMessage) (conversation, error) {
	last := -1
	for i, m := range msgs {
		if m.Role == "user" {
			last = i
		}
	}
	xs, _ := convExchanges(msgs, 0, max(last, 0))
	if err := s.checkExchanges(xs); err != nil { // before anything is stored
		return conversation{}, err
	}
	_, b, err := s.rt.CreateSessionFor(ctx, tenantOf(ctx), title)
	if err != nil {
		return conversation{}, err
	}
	from := 0
	if last >= 0 {
		if from, err = s.importHistory(ctx, b.ID, msgs, 0); err != nil {
			return conversation{}, err
		}
	}
	return conversation{Branch: b.ID, From: from, Created: true}, nil
}

// importHistory imports the exchanges of msgs from index from to the
// last user message into branch as finished turns (Runtime.Import), and
// enters the prefix each ends in the proxy's index, so that the client's
// next request, which holds them again, finds the branch and a request
// that edits one forks there. It returns the index of the last user
// message (from when there is none after from).
//
// An exchange is a user message (consecutive ones joined) and all that
// follows it up to the next user message: its assistant messages and
// tool results, folded into the reply's text ("[tool call ID]",
// "[tool result ID] text"); the content parts that are not text are
// named by their type ("[image_url part]"), not copied. System messages
// are not imported: the handlers pass them with the turn.
func (s *Server) importHistory(ctx context.Context, branch messages.BranchID, msgs []convMessage, from int) (int, error) {
	last := -1
	for i := from; i < len(msgs); i++ {
		if msgs[i].Role == "user" {
			last = i
		}
	}
	if last < 0 {
		return from, nil
	}
	xs, ends := convExchanges(msgs, from, last)
	if len(xs) == 0 {
		return last, nil
	}
	if err := s.checkExchanges(xs); err != nil {
		return 0, err
	}
	var turns []messages.PendingTurn
	for len(xs) > 0 {
		n := min(len(xs), actors.MaxImport)
		ts, err := s.rt.Import(ctx, branch, xs[:n])
		if err != nil {
			return 0, fmt.Errorf("import the request's earlier messages: %w", err)
		}
		turns, xs = append(turns, ts...), xs[n:]
	}
	prefixes := convPrefixes(msgs[:last])
	tenant := tenantOf(ctx)
	var entries []persistence.ProxyEntry
	for i, t := range turns {
		entries = append(entries, persistence.ProxyEntry{Tenant: tenant, Kind: persistence.ProxyByTurn, Name: t.Turn[:],
			ProxyTarget: persistence.ProxyTarget{Branch: branch}})
		if ends[i] < 0 {
			continue
		}
		for _, p := range prefixes {
			if p.end == ends[i] {
				entries = append(entries, persistence.ProxyEntry{Tenant: tenant, Kind: persistence.ProxyByPrefix, Name: p.hash[:],
					ProxyTarget: persistence.ProxyTarget{Branch: branch, Turn: t.Turn}})
			}
		}
	}
	if _, err := s.rt.DB().Commit(ctx, &persistence.Tx{Proxy: entries}); err != nil {
		return 0, err
	}
	return last, nil
}

// checkExchanges refuses exchanges the store would refuse to append,
// naming the message.
func (s *Server) checkExchanges(xs []actors.Exchange) error {
	for i, x := range xs {
		for _, m := range []messages.Message{x.User, x.Reply} {
			data, err := m.MarshalJSON()
			if err != nil {
				return invalid("earlier messages, exchange %d: %v", i, err)
			}
			if err := s.rt.DB().CheckPayload(fmt.Sprintf("earlier messages, exchange %d (%s)", i, m.Role), len(data)); err != nil {
				return err
			}
		}
	}
	return nil
}

// convExchanges are the exchanges of msgs[from:to] (see importHistory),
// and for each the index of its last assistant message (-1 if none).
func convExchanges(msgs []convMessage, from, to int) ([]actors.Exchange, []int) {
	var xs []actors.Exchange
	var ends []int
	var user, reply []string
	end, open := -1, false
	flush := func() {
		if open {
			xs = append(xs, actors.Exchange{User: textMessage(messages.RoleUser, user), Reply: textMessage(messages.RoleAssistant, reply)})
			ends = append(ends, end)
		}
		user, reply, end, open = nil, nil, -1, false
	}
	for i := from; i < to && i < len(msgs); i++ {
		m := msgs[i]
		switch m.Role {
		case "user":
			if len(reply) > 0 || end >= 0 {
				flush()
			}
			open = true
			user = append(user, partsText(m.Text, m.Other))
		case "assistant":
			open, end = true, i
			t := partsText(m.Text, m.Other)
			for _, id := range m.Calls {
				t = joinText(t, "[tool call "+id+"]")
			}
			reply = append(reply, t)
		case "tool":
			open = true
			reply = append(reply, joinText("[tool result "+m.CallID+"]", partsText(m.Text, m.Other)))
		}
	}
	flush()
	return xs, ends
}

// textMessage is a message of role whose text is parts joined by blank
// lines (no block when that is empty).
func textMessage(role messages.Role, parts []string) messages.Message {
	var nonEmpty []string
	for _, p := range parts {
		if p != "" {
			nonEmpty = append(nonEmpty, p)
		}
	}
	if len(nonEmpty) == 0 {
		return messages.NewMessage(role)
	}
	return messages.NewMessage(role, messages.Text{Text: strings.Join(nonEmpty, "\n\n")})
}

// partsText is text followed by the names of the other parts.
func partsText(text string, other []json.RawMessage) string {
	for _, p := range other {
		var part struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(p, &part)
		if part.Type == "" {
			part.Type = "other"
		}
		text = joinText(text, "["+part.Type+" part]")
	}
	return text
}

func joinText(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "\n" + b
}

// continueAt returns the branch a request that continues turn of branch
// goes on: branch itself when turn is its latest (no turn after it but
// failed ones, which the branch's context leaves out), else a fork of
// branch at turn.
func (s *Server) continueAt(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (messages.BranchID, error) {
	info, err := s.rt.Inspect(ctx, branch)
	if err != nil {
		return branch, err
	}
	seq := uint64(0)
	for _, t := range info.Turns {
		if t.ID == turn {
			seq = t.Seq
		}
	}
	if seq == 0 {
		row, err := s.rt.TurnRow(ctx, branch, turn)
		if err != nil {
			return branch, err
		}
		seq = row.Seq
	}
	later := false // a turn after turn that did not fail
	for next := seq + 1; next <= info.TurnSeq && !later; {
		rows, err := s.rt.DB().TurnRows(ctx, branch, next, 100)
		if err != nil {
			return branch, err
		}
		if len(rows) == 0 {
			later = true // in flight, its acceptance not yet committed
			break
		}
		for _, r := range rows {
			later = later || r.Phase != messages.PhaseFailed
		}
		next = rows[len(rows)-1].Seq + 1
	}
	if later {
		fork, err := s.rt.Fork(ctx, branch, turn, "proxy")
		if err != nil {
			return branch, fmt.Errorf("continue the conversation at turn %d of branch %s: %w", seq, branch, err)
		}
		return fork.ID, nil
	}
	return branch, nil
}

// turnBranch is the branch that ran turn: the tenant's proxy index
// says, for a turn it answered; else the branch of the tenant's with a
// row of the turn made first. A turn of another tenant's is not found.
func (s *Server) turnBranch(ctx context.Context, turn messages.TurnID) (messages.BranchID, error) {
	db := s.rt.DB()
	t, err := db.ProxyLookup(ctx, tenantOf(ctx), persistence.ProxyByTurn, turn[:])
	if err == nil {
		return t.Branch, nil
	}
	if !errors.Is(err, persistence.ErrProxyNotFound) {
		return messages.BranchID{}, err
	}
	bs, err := db.TurnBranches(ctx, turn)
	if err != nil {
		return messages.BranchID{}, err
	}
	for _, b := range bs {
		_, err := s.ownBranch(ctx, b)
		if err == nil {
			return b, nil
		}
		if ae := (*apiError)(nil); !errors.As(err, &ae) || ae.Code != CodeNotFound {
			return messages.BranchID{}, err
		}
	}
	return messages.BranchID{}, notFound("previous response: no turn %s", turn)
}

// rememberConversation records that msgs, then reply, are the
// transcript of branch up to turn's reply, as the client holds it: a
// request that continues them finds branch (and, should branch have gone
// on since, forks it at turn). It also records turn's branch, for the
// previous response ids that name turn. The handlers call it once the
// turn's stream is Done, final or awaiting the client's tool results,
// before they answer.
func (s *Server) rememberConversation(ctx context.Context, branch messages.BranchID, turn messages.TurnID, msgs []convMessage, reply convMessage) error {
	if reply.Role == "" {
		reply.Role = "assistant"
	}
	h := sha256.New()
	var buf []byte
	for _, m := range msgs {
		buf = writeConvMessage(h, buf, m)
	}
	writeConvMessage(h, buf, reply)
	sum := h.Sum(nil)
	tenant := tenantOf(ctx)
	entries := []persistence.ProxyEntry{
		{Tenant: tenant, Kind: persistence.ProxyByPrefix, Name: sum, ProxyTarget: persistence.ProxyTarget{Branch: branch, Turn: turn}},
		{Tenant: tenant, Kind: persistence.ProxyByTurn, Name: turn[:], ProxyTarget: persistence.ProxyTarget{Branch: branch}},
	}
	if _, err := s.rt.DB().Commit(ctx, &persistence.Tx{Proxy: entries}); err != nil {
		return fmt.Errorf("remember the conversation of turn %s: %w", turn, err)
	}
	return nil
}

// convPrefix is the hash of a request's messages up to and including
// the assistant message at end.
type convPrefix struct {
	end  int
	hash [32]byte
}

// convPrefixes are the hashes of the prefixes of msgs that end in an
// assistant message, shortest first. A prefix's hash is SHA-256 over its
// messages' encodings (writeConvMessage), one after the other.
func convPrefixes(msgs []convMessage) []convPrefix {
	h := sha256.New()
	var out []convPrefix
	var buf []byte
	for i, m := range msgs {
		buf = writeConvMessage(h, buf, m)
		if m.Role == "assistant" {
			p := convPrefix{end: i}
			h.Sum(p.hash[:0])
			out = append(out, p)
		}
	}
	return out
}

// writeConvMessage writes m's canonical encoding to h (buf is scratch
// space, returned for reuse): role, text, other parts (compacted JSON),
// call ids and call id, each length-prefixed, so that no two messages
// or sequences of messages encode alike. It is what the index compares,
// and must not change: the prefixes stored would no longer be found.
func writeConvMessage(h hash.Hash, buf []byte, m convMessage) []byte {
	str := func(s string) {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	buf = buf[:0]
	str(m.Role)
	str(m.Text)
	buf = binary.AppendUvarint(buf, uint64(len(m.Other)))
	for _, p := range m.Other {
		var c bytes.Buffer
		if json.Compact(&c, p) == nil {
			p = c.Bytes()
		}
		str(string(p))
	}
	buf = binary.AppendUvarint(buf, uint64(len(m.Calls)))
	for _, id := range m.Calls {
		str(id)
	}
	str(m.CallID)
	h.Write(buf)
	return buf
}

// proxySessions is the proxy's state in the server: the per-key locks
// (the requests for one conversation key find or make its conversation
// one at a time) and the conversations' queues (proxyQueues). The
// conversations themselves are in the store's proxy index.
type proxySessions struct {
	mu     sync.Mutex
	keys   map[string]*keyLock
	queues proxyQueues
}

type keyLock struct {
	mu    sync.Mutex
	users int
}

// lock locks key and returns its unlock.
func (pc *proxySessions) lock(key string) func() {
	pc.mu.Lock()
	if pc.keys == nil {
		pc.keys = map[string]*keyLock{}
	}
	l := pc.keys[key]
	if l == nil {
		l = &keyLock{}
		pc.keys[key] = l
	}
	l.users++
	pc.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		pc.mu.Lock()
		if l.users--; l.users == 0 {
			delete(pc.keys, key)
		}
		pc.mu.Unlock()
	}
}
