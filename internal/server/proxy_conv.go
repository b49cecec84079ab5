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
	"github.com/contextinfinity/ctxinf/api"
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
	// Session is the session of a conversation made for the request.
	Session messages.SessionID
	// Key is the idempotency key the request's turn is submitted under:
	// its Idempotency-Key, or the proxy's own (proxyRetries).
	Key string
	// pending are the index entries of the history imported into a
	// conversation made for the request that nothing names yet: they
	// are entered with its turn's transcript (rememberConversation), so
	// that a conversation dropped when its request fails (droppable)
	// leaves no entry behind.
	pending []persistence.ProxyEntry
	// droppable: the conversation was made for the request and nothing
	// names it (no key, no Idempotency-Key): dropConversation deletes it
	// if the request fails.
	droppable bool
}

// convQuery is what a proxied request says of its conversation: the
// conversation key its body names (metadata.conversation, the Responses
// API's conversation; "" if none), the end user it names (label: the
// OpenAI APIs' user, Anthropic's metadata.user_id; "" if none), the turn
// a previous response id names (zero if none) and its messages.
//
// A label is not a conversation's name: one end user has many
// conversations. It scopes the transcripts a request may continue: a
// request finds by its messages only a conversation whose requests
// named the same end user (or, both, none).
//
// orphan, if not nil, is the refusal of a request whose messages end
// with tool results and that would need a new conversation: no
// conversation the proxy makes awaits them.
type convQuery struct {
	key, label string
	previous   messages.TurnID
	msgs       []convMessage
	orphan     error
}

// MaxEndUser is the longest end-user label a proxied request may name,
// in bytes.
const MaxEndUser = 256

// check refuses a label over MaxEndUser, naming field (the request's
// field that holds it).
func (q convQuery) check(field string) error {
	if len(q.label) > MaxEndUser {
		return invalid("%s: %d bytes, limit %d", field, len(q.label), MaxEndUser)
	}
	return nil
}

// findConversationFor finds the conversation of a proxied request q
// tells of. In order:
//
//   - the X-Ctx-Branch header: that branch;
//   - the X-Ctx-Conversation header, else q.key: the branch of the key
//     in the proxy's index (persistence.ProxyByKey), or a new
//     conversation for it;
//   - the Idempotency-Key header, when the request was sent before:
//     where it went then;
//   - q.previous: the branch that ran that turn;
//   - the messages (matchHashes): the latest point of msgs, an
//     assistant message, where they continue a transcript a reply of
//     the proxy ended (rememberConversation, in a conversation the
//     request did not name) for the same end user (q.label), system
//     messages left out: the whole transcript up to there, or its last
//     tailLen messages (a client that sends only a window of its
//     history); the branch of that reply's turn;
//   - else a new conversation.
//
// All of them are the request's tenant's: a branch of another tenant is
// not found, and the keys, transcripts, turns and request keys are
// looked up in the tenant's index only.
//
// For a branch, a key's existing conversation or previous, From is the
// index after msgs' last assistant message; for a transcript, the index
// after its point. A turn found (previous, or a transcript's) that is
// not its branch's latest (the client edited or regenerated from an
// earlier point) is forked there (Runtime.Fork), and the fork is the
// conversation: the branch keeps its own later turns. A new conversation
// is a session titled with the request's first user message and labeled
// with its end user and client (newConversation); the exchanges msgs
// holds before its last user message are imported into it as finished
// turns (importHistory), and From is that last user message's index. A
// request whose messages end with tool results gets q.orphan rather than
// a new conversation. The exchanges after a transcript's point the branch
// does not hold (a client that made up assistant messages) are imported
// likewise.
//
// A new conversation that no key or Idempotency-Key names is droppable:
// its history's index entries wait for its turn's (conversation.pending),
// and a request that fails drops it (startProxyTurn).
func (s *Server) findConversationFor(r *http.Request, q convQuery) (conversation, error) {
	ctx := r.Context()
	after := 0
	for i, m := range q.msgs {
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
			if ae := (*apiError)(nil); errors.As(err, &ae) && ae.Code == api.CodeNotFound {
				return conversation{}, notFound("%s header: branch %s", ProxyBranchHeader, id)
			}
			return conversation{}, err
		}
		return conversation{Branch: id, From: after, Named: true}, nil
	}
	key, field := q.key, "conversation key (the request's conversation or metadata.conversation)"
	if h := r.Header.Get(ProxyConversationHeader); h != "" {
		key, field = h, ProxyConversationHeader+" header"
	}
	if key != "" {
		if len(key) > MaxConversationKey {
			return conversation{}, invalid("%s: %d bytes, limit %d", field, len(key), MaxConversationKey)
		}
		c, err := s.keyedConversation(r, key, q, after)
		c.Named = true
		return c, err
	}
	idem, err := idempotencyKey(r)
	if err != nil {
		return conversation{}, err
	}
	if idem == "" {
		c, err := s.keylessConversation(r, q, after)
		c.droppable = c.Created
		return c, err
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
	c, err := s.keylessConversation(r, q, after)
	if err != nil {
		return c, err
	}
	e := persistence.ProxyEntry{Tenant: tenant, Kind: persistence.ProxyByRequest, Name: []byte(idem),
		ProxyTarget: persistence.ProxyTarget{Branch: c.Branch}}
	if _, err := db.Commit(ctx, &persistence.Tx{Proxy: append(c.pending, e)}); err != nil {
		s.dropConversation(ctx, c)
		return conversation{}, err
	}
	c.pending = nil
	return c, nil
}

// lookupConversation is findConversationFor without its side effects:
// the branch the request q tells of would go on (by the X-Ctx-Branch
// header, a key, a previous response id or its transcript, for the
// request's tenant), and the index of its first message the branch does
// not hold; ok is false when the request would start a new
// conversation. It makes, forks and records nothing: a branch found
// whose turn is not its latest is the branch itself, not the fork the
// request would run on. For the routes that answer about a request
// without running it (counting its tokens).
func (s *Server) lookupConversation(r *http.Request, q convQuery) (c conversation, ok bool, err error) {
	ctx := r.Context()
	after := 0
	for i, m := range q.msgs {
		if m.Role == "assistant" {
			after = i + 1
		}
	}
	if h := r.Header.Get(ProxyBranchHeader); h != "" {
		c, err := s.findConversationFor(r, q) // names the branch: finds it, makes nothing
		return c, err == nil, err
	}
	db, tenant := s.rt.DB(), tenantOf(ctx)
	key := q.key
	if h := r.Header.Get(ProxyConversationHeader); h != "" {
		key = h
	}
	if key != "" {
		t, err := db.ProxyLookup(ctx, tenant, persistence.ProxyByKey, []byte(key))
		if errors.Is(err, persistence.ErrProxyNotFound) || len(key) > MaxConversationKey {
			return conversation{}, false, nil
		}
		return conversation{Branch: t.Branch, From: after, Named: true}, err == nil, err
	}
	if !q.previous.IsZero() {
		b, err := s.turnBranch(ctx, q.previous)
		return conversation{Branch: b, From: after}, err == nil, err
	}
	ms := matchHashes(q.label, q.msgs)
	i, t, err := db.ProxyLongestPrefix(ctx, tenant, matchNames(ms))
	if err != nil || i < 0 {
		return conversation{}, false, err
	}
	return conversation{Branch: t.Branch, From: ms[i].end + 1}, true, nil
}

// keylessConversation is findConversationFor for a request that names
// no branch or key: by q.previous, else by q's transcript.
func (s *Server) keylessConversation(r *http.Request, q convQuery, after int) (conversation, error) {
	ctx := r.Context()
	if !q.previous.IsZero() {
		b, err := s.turnBranch(ctx, q.previous)
		if err != nil {
			return conversation{}, err
		}
		if b, err = s.continueAt(ctx, b, q.previous); err != nil {
			return conversation{}, err
		}
		return conversation{Branch: b, From: after}, nil
	}
	ms := matchHashes(q.label, q.msgs)
	i, t, err := s.rt.DB().ProxyLongestPrefix(ctx, tenantOf(ctx), matchNames(ms))
	if err != nil {
		return conversation{}, err
	}
	if i < 0 {
		if q.orphan != nil && lastRole(q.msgs) == "tool" {
			return conversation{}, q.orphan
		}
		return s.newConversation(r, q.label, q.msgs)
	}
	b, err := s.continueAt(ctx, t.Branch, t.Turn)
	if err != nil {
		return conversation{}, err
	}
	from := ms[i].end + 1
	if from < after { // exchanges the branch does not hold
		var entries []persistence.ProxyEntry
		if from, entries, err = s.importHistory(ctx, b, q.label, q.msgs, from); err != nil {
			return conversation{}, err
		}
		if _, err := s.rt.DB().Commit(ctx, &persistence.Tx{Proxy: entries}); err != nil {
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
func (s *Server) keyedConversation(r *http.Request, key string, q convQuery, after int) (conversation, error) {
	ctx := r.Context()
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
	if q.orphan != nil && lastRole(q.msgs) == "tool" {
		return conversation{}, q.orphan
	}
	c, err := s.newConversation(r, q.label, q.msgs)
	if err != nil {
		return conversation{}, err
	}
	if _, err := db.Commit(ctx, &persistence.Tx{Proxy: c.pending}); err != nil {
		s.dropConversation(ctx, c)
		return conversation{}, err
	}
	c.pending = nil
	if t, err = db.ClaimProxyKey(ctx, tenant, key, c.Branch); err != nil {
		s.dropConversation(ctx, c)
		return conversation{}, err
	}
	if t.Branch != c.Branch { // another process entered the key first
		s.dropConversation(ctx, c)
		return conversation{Branch: t.Branch, From: after}, nil
	}
	return c, nil
}

// newConversation makes a session for msgs, with their history imported
// (importHistory) for the end user label; the index entries of the
// history are the conversation's pending ones. The session is titled
// with its first user message (proxyTitle) and labeled with the
// request's end user and client (proxyMetadata).
func (s *Server) newConversation(r *http.Request, label string, msgs []convMessage) (conversation, error) {
	ctx := r.Context()
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
	sess, b, err := s.rt.CreateSessionWith(ctx, tenantOf(ctx), proxyTitle(msgs), proxyMetadata(r, label))
	if err != nil {
		return conversation{}, err
	}
	c := conversation{Branch: b.ID, Created: true, Session: sess.ID}
	if last >= 0 {
		if c.From, c.pending, err = s.importHistory(ctx, b.ID, label, msgs, 0); err != nil {
			s.dropConversation(ctx, c)
			return conversation{}, err
		}
	}
	return c, nil
}

// importHistory imports the exchanges of msgs from index from to the
// last user message into branch as finished turns (Runtime.Import), and
// enters the transcript each ends in the proxy's index (its whole
// transcript, for the end user label), so that the client's next
// request, which holds them again, finds the branch and a request that
// edits one forks there. It returns the index of the last user message
// (from when there is none after from) and the index entries, for the
// caller to commit.
//
// An exchange is a user message (consecutive ones joined) and all that
// follows it up to the next user message: its assistant messages and
// tool results, folded into the reply's text ("[tool call ID]",
// "[tool result ID] text"); the content parts that are not text are
// named by their type ("[image_url part]"), not copied. System messages
// are not imported: the handlers pass them with the turn.
func (s *Server) importHistory(ctx context.Context, branch messages.BranchID, label string, msgs []convMessage, from int) (int, []persistence.ProxyEntry, error) {
	last := -1
	for i := from; i < len(msgs); i++ {
		if msgs[i].Role == "user" {
			last = i
		}
	}
	if last < 0 {
		return from, nil, nil
	}
	xs, ends := convExchanges(msgs, from, last)
	if len(xs) == 0 {
		return last, nil, nil
	}
	if err := s.checkExchanges(xs); err != nil {
		return 0, nil, err
	}
	var turns []messages.PendingTurn
	for len(xs) > 0 {
		n := min(len(xs), actors.MaxImport)
		ts, err := s.rt.Import(ctx, branch, xs[:n])
		if err != nil {
			return 0, nil, fmt.Errorf("import the request's earlier messages: %w", err)
		}
		turns, xs = append(turns, ts...), xs[n:]
	}
	wholes := map[int][32]byte{}
	for _, m := range matchHashes(label, msgs[:last]) {
		if m.kind == matchWhole {
			wholes[m.end] = m.hash
		}
	}
	tenant := tenantOf(ctx)
	var entries []persistence.ProxyEntry
	for i, t := range turns {
		entries = append(entries, persistence.ProxyEntry{Tenant: tenant, Kind: persistence.ProxyByTurn, Name: t.Turn[:],
			ProxyTarget: persistence.ProxyTarget{Branch: branch}})
		if h, ok := wholes[ends[i]]; ok && ends[i] >= 0 {
			entries = append(entries, persistence.ProxyEntry{Tenant: tenant, Kind: persistence.ProxyByPrefix, Name: h[:],
				ProxyTarget: persistence.ProxyTarget{Branch: branch, Turn: t.Turn}})
		}
	}
	return last, entries, nil
}

// checkExchanges refuses exchanges the store would refuse to append,
// naming the message, and more of them than one request may import
// (Options.ProxyMaxImport).
func (s *Server) checkExchanges(xs []actors.Exchange) error {
	if n := len(xs); n > s.opts.ProxyMaxImport {
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge, Message: fmt.Sprintf(
			"messages: the request's earlier messages hold %d exchanges for this conversation to import, over the limit of %d "+
				"(server.proxy_max_import): import a long history once with POST /v1/sessions/import and continue it with "+
				"the X-Ctx-Branch header, or name the conversation (X-Ctx-Conversation, metadata.conversation) so that later "+
				"requests do not import it again", n, s.opts.ProxyMaxImport)}
	}
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
		if ae := (*apiError)(nil); !errors.As(err, &ae) || ae.Code != api.CodeNotFound {
			return messages.BranchID{}, err
		}
	}
	return messages.BranchID{}, notFound("previous response: no turn %s", turn)
}

// rememberConversation records that msgs, then reply, are the
// transcript of conv's branch up to turn's reply, as the client holds
// it (with conv's pending entries, the history imported into it), for
// the end user label: a request that continues them (all of them, or
// their last tailLen; system messages left out: matchHashes) finds the
// branch (and, should the branch have gone on since, forks it at turn). It
// also records turn's branch, for the previous response ids that name
// turn. The handlers call it once the turn's stream is Done, final or
// awaiting the client's tool results, before they answer.
func (s *Server) rememberConversation(ctx context.Context, conv conversation, turn messages.TurnID, label string,
	msgs []convMessage, reply convMessage) error {
	if reply.Role == "" {
		reply.Role = "assistant"
	}
	branch := conv.Branch
	all := append(msgs[:len(msgs):len(msgs)], reply)
	tenant := tenantOf(ctx)
	entries := append(conv.pending[:len(conv.pending):len(conv.pending)], persistence.ProxyEntry{
		Tenant: tenant, Kind: persistence.ProxyByTurn, Name: turn[:], ProxyTarget: persistence.ProxyTarget{Branch: branch}})
	for _, m := range matchHashes(label, all) {
		if m.end == len(all)-1 && m.kind != matchLegacy {
			entries = append(entries, persistence.ProxyEntry{Tenant: tenant, Kind: persistence.ProxyByPrefix, Name: m.hash[:],
				ProxyTarget: persistence.ProxyTarget{Branch: branch, Turn: turn}})
		}
	}
	if _, err := s.rt.DB().Commit(ctx, &persistence.Tx{Proxy: entries}); err != nil {
		return fmt.Errorf("remember the conversation of turn %s: %w", turn, err)
	}
	return nil
}

// tailLen is how many of a transcript's last messages (system messages
// left out) find it: a client that keeps a window of its history (the
// last N messages) sends them again.
const tailLen = 3

// The kinds of a transcript's hashes (convMatch), each hashed after a
// mark of its own so that no two kinds hash alike.
const (
	matchLegacy byte = 0   // all its messages, system ones too, no end user: the index's entries before end users
	matchTail   byte = 't' // its last tailLen messages, system ones left out, and the end user
	matchWhole  byte = 'w' // all its messages, system ones left out, and the end user
)

// convMatch is a hash a request's transcript up to and including the
// assistant message at end can be found by.
type convMatch struct {
	end  int
	kind byte
	hash [32]byte
}

// matchHashes are the hashes the transcript msgs can be found by, for
// the end user label: for each of its assistant messages, in order, the
// hashes of the transcript up to it: legacy (without a label only),
// tail (with tailLen messages or more up to it) and whole, in that order.
// The last a store holds is the request's best match
// (ProxyLongestPrefix): the latest point, and there the whole transcript
// before its tail before a legacy entry.
//
// Whole and tail hash the label (length-prefixed) after their mark, then
// the messages' encodings (writeConvMessage) without system messages,
// whose changes (a date, a clock many agents put there) do not make
// another conversation; the proxy passes the request's system prompt
// with its turn all the same. A legacy hash is SHA-256 over the
// encodings of all the messages, as the index stored them before end
// users: a conversation remembered then is found again.
func matchHashes(label string, msgs []convMessage) []convMatch {
	legacy, whole := sha256.New(), sha256.New()
	var buf []byte
	whole.Write([]byte{matchWhole})
	buf = binary.AppendUvarint(buf[:0], uint64(len(label)))
	whole.Write(append(buf, label...))
	var kept []int // indexes of the messages that are not system ones
	var out []convMatch
	for i, m := range msgs {
		if label == "" {
			buf = writeConvMessage(legacy, buf, m)
		}
		if m.Role == "system" {
			continue
		}
		kept = append(kept, i)
		buf = writeConvMessage(whole, buf, m)
		if m.Role != "assistant" {
			continue
		}
		if label == "" {
			x := convMatch{end: i, kind: matchLegacy}
			legacy.Sum(x.hash[:0])
			out = append(out, x)
		}
		if len(kept) >= tailLen {
			tail := sha256.New()
			buf = append(binary.AppendUvarint(append(buf[:0], matchTail), uint64(len(label))), label...)
			tail.Write(buf)
			for _, j := range kept[len(kept)-tailLen:] {
				buf = writeConvMessage(tail, buf, msgs[j])
			}
			x := convMatch{end: i, kind: matchTail}
			tail.Sum(x.hash[:0])
			out = append(out, x)
		}
		x := convMatch{end: i, kind: matchWhole}
		whole.Sum(x.hash[:0])
		out = append(out, x)
	}
	return out
}

// matchNames are the hashes of ms, in order.
func matchNames(ms []convMatch) [][32]byte {
	out := make([][32]byte, len(ms))
	for i, m := range ms {
		out[i] = m.hash
	}
	return out
}

// writeConvMessage writes m's canonical encoding to h (buf is scratch
// space, returned for reuse): role, text, other parts (compacted JSON),
// call ids and call id, each length-prefixed, so that no two messages
// or sequences of messages encode alike. It is what the index compares,
// and must not change: the transcripts stored would no longer be found.
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
// one at a time), the conversations' queues (proxyQueues) and the
// requests whose SDK retries are the same turn (proxyRetries). The
// conversations themselves are in the store's proxy index.
type proxySessions struct {
	mu      sync.Mutex
	keys    map[string]*keyLock
	queues  proxyQueues
	retries proxyRetries
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

// query is what pc says of its conversation.
func (pc *proxyCall) query() convQuery {
	return convQuery{key: pc.key, label: pc.label, previous: pc.previous, msgs: pc.msgs}
}

// lastRole is the role of the last message of msgs that is not a system
// one ("" if none).
func lastRole(msgs []convMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "system" {
			return msgs[i].Role
		}
	}
	return ""
}

// MaxProxyTitle is the longest title of a proxied conversation's
// session, in characters.
const MaxProxyTitle = 80

// proxyTitle is the title of a conversation made for msgs: its first
// user message's text (its parts named when it has none), white space
// collapsed, cut to MaxProxyTitle characters (the last an ellipsis);
// "(no text)" when that is empty.
func proxyTitle(msgs []convMessage) string {
	text := ""
	for _, m := range msgs {
		if m.Role == "user" {
			text = strings.Join(strings.Fields(partsText(m.Text, m.Other)), " ")
			break
		}
	}
	if text == "" {
		return "(no text)"
	}
	if rs := []rune(text); len(rs) > MaxProxyTitle {
		text = strings.TrimRight(string(rs[:MaxProxyTitle-1]), " ") + "…"
	}
	return text
}

// MaxProxyClient is the longest client (User-Agent) a proxied
// conversation's session keeps, in bytes.
const MaxProxyClient = 256

// The keys of a proxied conversation's session metadata
// (persistence.SessionRow.Metadata).
const (
	MetaSource  = "source"   // "proxy"
	MetaEndUser = "end_user" // the request's end user (user, metadata.user_id), if any
	MetaClient  = "client"   // the request's User-Agent, if any (its first MaxProxyClient bytes)
)

// proxyMetadata is the metadata of a session made for the request r of
// the end user label.
func proxyMetadata(r *http.Request, label string) map[string]string {
	m := map[string]string{MetaSource: "proxy"}
	if label != "" {
		m[MetaEndUser] = label
	}
	if ua := r.UserAgent(); ua != "" {
		if len(ua) > MaxProxyClient {
			ua = strings.ToValidUTF8(ua[:MaxProxyClient], "")
		}
		m[MetaClient] = ua
	}
	return m
}

// dropConversation deletes the session of c, a conversation made for a
// request that failed, so that failed requests leave no sessions behind;
// a failure to delete it is logged.
func (s *Server) dropConversation(ctx context.Context, c conversation) {
	if c.Session.IsZero() {
		return
	}
	if _, err := s.rt.DeleteSession(context.WithoutCancel(ctx), c.Session); err != nil {
		s.opts.Log.Warn().Err(err).Str("session", c.Session.String()).Msg("proxy: drop the conversation of a failed request")
	}
}
