package server

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/internal/retrieval"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Limits of request fields.
const (
	MaxTitleBytes = 256
	MaxLabelBytes = 128
	MaxQueryBytes = 8 << 10
	MaxHistory    = 1000
	MaxSearchK    = 100
)

// IdempotencyKeyHeader names a request that may be sent again (turns,
// forks, imports, proxied turns): a repeat under the same key is
// answered with what the first made and stores nothing new.
const IdempotencyKeyHeader = "Idempotency-Key"

// idempotencyKey returns the request's Idempotency-Key, "" if none.
func idempotencyKey(r *http.Request) (string, error) {
	vs := r.Header.Values(IdempotencyKeyHeader)
	if len(vs) == 0 {
		return "", nil
	}
	k := vs[0]
	if len(vs) > 1 {
		return "", invalid("%s: sent %d times, want once", IdempotencyKeyHeader, len(vs))
	}
	if err := persistence.CheckIdempotencyKey(k); err != nil {
		return "", invalid("%s: %d bytes, want 1 to %d printable ASCII characters (0x20 to 0x7e)",
			IdempotencyKeyHeader, len(k), persistence.MaxIdempotencyKey)
	}
	return k, nil
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) error {
	var in api.CreateSessionRequest
	if err := decodeOptional(r, &in); err != nil {
		return err
	}
	if len(in.Title) > MaxTitleBytes {
		return invalid("title: %d bytes, limit %d", len(in.Title), MaxTitleBytes)
	}
	sess, b, err := s.rt.CreateSessionFor(r.Context(), tenantOf(r.Context()), in.Title)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, api.CreatedSession{Session: Session(sess), Branch: Branch(b)})
	return nil
}

// listSessions lists a page of the tenant's sessions (?limit, ?cursor,
// ?order: pageOf); query parameters metadata.KEY=VALUE (or
// metadata[KEY]=VALUE) keep those whose metadata has KEY set to VALUE,
// all of them.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	where, err := metadataFilter(r.URL.Query())
	if err != nil {
		return err
	}
	p, err := pageOf(r, listSessions, 16, true)
	if err != nil {
		return err
	}
	rows, more, err := s.sessionPage(r.Context(), p, func(row persistence.SessionRow) bool { return matchesMetadata(row.Metadata, where) })
	if err != nil {
		return err
	}
	out := api.SessionList{Sessions: make([]api.Session, 0, len(rows))}
	for _, row := range rows {
		out.Sessions = append(out.Sessions, Session(row))
	}
	if more {
		out.Next = p.next(listSessions, rows[len(rows)-1].ID[:])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// sessionPage reads the page p of ctx's tenant's sessions that keep
// keeps (nil: all) from the store's pages of that tenant alone, and
// whether more follow.
func (s *Server) sessionPage(ctx context.Context, p page, keep func(persistence.SessionRow) bool) ([]persistence.SessionRow, bool, error) {
	q := persistence.SessionQuery{Tenant: tenantOf(ctx), Limit: p.limit + 1, Newest: p.newest}
	if p.after != nil {
		q.After = messages.SessionID(p.after)
	}
	out := []persistence.SessionRow{}
	for {
		rows, err := s.rt.DB().SessionPage(ctx, q)
		if err != nil {
			return nil, false, err
		}
		for _, row := range rows {
			if keep != nil && !keep(row) {
				continue
			}
			if len(out) == p.limit {
				return out, true, nil
			}
			out = append(out, row)
		}
		if len(rows) < q.Limit {
			return out, false, nil
		}
		q.After = rows[len(rows)-1].ID
		q.Limit = max(q.Limit, sessionScan) // filtered: read on in larger pages
	}
}

// sessionScan is how many sessions a filtered listing reads per store
// page once its first page fell short.
const sessionScan = 512

// getSession answers a session of the tenant's.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID[messages.SessionID](r, "session")
	if err != nil {
		return err
	}
	row, err := s.ownSession(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, Session(row))
	return nil
}

func (s *Server) listBranches(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID[messages.SessionID](r, "session")
	if err != nil {
		return err
	}
	p, err := pageOf(r, listBranches, 16, false)
	if err != nil {
		return err
	}
	if _, err := s.ownSession(r.Context(), id); err != nil {
		return err
	}
	var after messages.BranchID
	copy(after[:], p.after)
	bs, err := s.rt.DB().BranchPage(r.Context(), id, after, p.limit+1)
	if err != nil {
		return err
	}
	out := api.BranchList{Branches: Branches(bs[:min(len(bs), p.limit)])}
	if len(bs) > p.limit {
		out.Next = p.next(listBranches, bs[p.limit-1].ID[:])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// branch returns the {branch} of r's path, if r's tenant owns it
// (ownBranch): every /v1/branches/{branch} route starts with it.
func (s *Server) branch(r *http.Request) (messages.BranchID, persistence.BranchRow, error) {
	id, err := pathID[messages.BranchID](r, "branch")
	if err != nil {
		return id, persistence.BranchRow{}, err
	}
	row, err := s.ownBranch(r.Context(), id)
	return id, row, err
}

func (s *Server) getBranch(w http.ResponseWriter, r *http.Request) error {
	id, row, err := s.branch(r)
	if err != nil {
		return err
	}
	info, err := s.rt.Inspect(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, BranchInfo(row, info))
	return nil
}

func (s *Server) fork(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	var in api.ForkRequest
	if err := decodeOptional(r, &in); err != nil {
		return err
	}
	var at messages.TurnID
	if in.At != "" {
		if at, err = messages.ParseID[messages.TurnID](in.At); err != nil {
			return invalid("at: %q is not a turn id", in.At)
		}
	}
	if len(in.Label) > MaxLabelBytes {
		return invalid("label: %d bytes, limit %d", len(in.Label), MaxLabelBytes)
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	b, err := s.rt.ForkWith(r.Context(), id, at, in.Label, actors.ForkOptions{Key: key})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, Branch(b))
	return nil
}

// recordExchange records an exchange that happened elsewhere (a user
// message and its model's reply) as a finished turn, folded and indexed
// like any other: 201 with the turn, or 200 with the turn an earlier
// request under the same Idempotency-Key recorded.
func (s *Server) recordExchange(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	var in api.ExchangeRequest
	if err := decode(r, &in); err != nil {
		return err
	}
	if strings.TrimSpace(in.User) == "" {
		return invalid("user: required")
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	x := actors.Exchange{User: messages.NewMessage(messages.RoleUser, messages.Text{Text: in.User}),
		Reply: messages.NewMessage(messages.RoleAssistant)}
	if in.Reply != "" {
		x.Reply = messages.NewMessage(messages.RoleAssistant, messages.Text{Text: in.Reply})
	}
	t, repeat, err := s.rt.Record(r.Context(), id, x, actors.RecordOptions{Key: key})
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if repeat {
		status = http.StatusOK
	}
	writeJSON(w, status, api.PendingTurn{Turn: t.Turn, Seq: t.Seq, Phase: messages.PhaseResponseFinalized, Reply: t.Reply})
	return nil
}

// submitTurn runs a turn. With "stream": true or Accept: text/event-stream
// it answers with server-sent events as the turn streams: "turn" (its id
// and seq), "delta" (text and the journal's displayed/durable byte
// counts), "item" (a tool call or output), and "done" (phase, outcome,
// counts, and for a failed turn its error and code); otherwise it waits
// for the end and answers JSON, or the error of a turn that failed (its
// code is the turn's outcome code: context_too_large, provider_error…).
func (s *Server) submitTurn(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	var in api.TurnRequest
	if err := decode(r, &in); err != nil {
		return err
	}
	if strings.TrimSpace(in.Text) == "" {
		return invalid("text: required")
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	stream, err := s.rt.SubmitWith(r.Context(), id, in.Text, actors.SubmitOptions{Key: key})
	if err != nil {
		return err
	}
	if in.Stream || strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		return s.streamTurn(w, r, stream)
	}
	text, last := stream.Wait(r.Context().Done())
	if err := turnFailed(stream.Turn, last); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.TurnResult{Turn: stream.Turn, Seq: stream.Seq, Reply: text, Phase: last.Phase, Outcome: last.Outcome,
		Error: last.Err, Displayed: last.Displayed, Durable: last.Durable, TextDisplayed: last.TextDisplayed, TextDurable: last.TextDurable})
	return nil
}

func (s *Server) streamTurn(w http.ResponseWriter, r *http.Request, st *actors.TurnStream) error {
	head := func(send func(string, any)) {
		send("turn", map[string]any{"turn": st.Turn, "seq": st.Seq, "branch": st.Branch})
	}
	var buf []byte
	return sseStream(w, r, st, nil, head, func(send func(string, any), u actors.Update) {
		switch {
		case u.Done:
			done := map[string]any{"phase": u.Phase, "displayed": u.Displayed, "durable": u.Durable,
				"text_displayed": u.TextDisplayed, "text_durable": u.TextDurable}
			if u.Outcome.Kind != 0 {
				done["outcome"] = u.Outcome
			}
			if u.Phase == messages.PhaseFailed {
				o := failedOutcome(u)
				done["outcome"], done["error"], done["code"] = o, o.Message, o.Code
				if u.RetryAfter > 0 { // the model's provider's, as a non-streamed answer's Retry-After
					done["retry_after_ms"] = u.RetryAfter.Milliseconds()
				}
			}
			send("done", done)
		case u.Item != nil:
			item, err := messages.MarshalItem(u.Item)
			if err == nil {
				send("item", map[string]any{"item": json.RawMessage(item), "displayed": u.Displayed, "durable": u.Durable,
					"text_displayed": u.TextDisplayed, "text_durable": u.TextDurable})
			}
		default:
			// By hand: a turn sends one per token.
			buf = append(buf[:0], `{"text":`...)
			buf = messages.AppendJSONString(buf, u.Delta)
			buf = append(buf, `,"displayed":`...)
			buf = strconv.AppendUint(buf, u.Displayed, 10)
			buf = append(buf, `,"durable":`...)
			buf = strconv.AppendUint(buf, u.Durable, 10)
			buf = append(buf, `,"text_displayed":`...)
			buf = strconv.AppendUint(buf, u.TextDisplayed, 10)
			buf = append(buf, `,"text_durable":`...)
			buf = strconv.AppendUint(buf, u.TextDurable, 10)
			send("delta", json.RawMessage(append(buf, '}')))
		}
	}, "")
}

func (s *Server) getTurn(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	var turn messages.TurnID
	if seq, perr := strconv.ParseUint(r.PathValue("turn"), 10, 64); perr == nil && seq > 0 {
		// The turn by its number on the branch.
		row, err := s.rt.TurnAt(r.Context(), id, seq)
		if err != nil {
			return err
		}
		turn = row.ID
	} else if turn, err = pathID[messages.TurnID](r, "turn"); err != nil {
		return err
	}
	out, err := TurnInfo(r.Context(), s.rt, id, turn)
	if errors.Is(err, persistence.ErrNodeNotFound) {
		return notFound("turn %s on branch %s", turn, id)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// TurnInfo is turn of branch as the API answers it (GET
// /v1/branches/{b}/turns/{t}, and the TUI on the embedded runtime shows
// it): its lifecycle row, its provider steps, the output recovered for a
// step a crash cut off, and the chunks it was indexed into (none before
// it is indexed). A turn not on the branch's transcript is
// persistence.ErrNodeNotFound.
func TurnInfo(ctx context.Context, rt *actors.Runtime, branch messages.BranchID, turn messages.TurnID) (api.TurnInfo, error) {
	found, err := rt.TurnRow(ctx, branch, turn)
	if err != nil {
		return api.TurnInfo{}, err
	}
	steps, err := rt.Steps(ctx, turn)
	if err != nil {
		return api.TurnInfo{}, err
	}
	chunks, err := rt.Chunks(ctx, turn)
	if err != nil {
		return api.TurnInfo{}, err
	}
	out := api.TurnInfo{Turn: Turn(found), Steps: []api.StepInfo{}, Chunks: make([]api.ChunkInfo, 0, len(chunks))}
	for _, c := range chunks {
		out.Chunks = append(out.Chunks, api.ChunkInfo{ID: c.ID, Seq: c.Seq, Node: c.Node, Start: c.Start, End: c.End,
			Type: c.Type, Text: c.Text, Summary: c.Summary, TokenEst: c.TokenEst})
	}
	if len(steps) > 0 && steps[0].Context != nil {
		rc := steps[0].Context
		out.System, out.Tools, out.ToolMode, out.ToolChoice, out.Params = rc.System, rc.Tools, rc.ToolMode, rc.ToolChoice, rc.Params
	}
	for _, st := range steps {
		out.Steps = append(out.Steps, api.StepInfo{ID: st.ID, Index: st.Index, Provider: st.Provider, Model: st.Model,
			Outcome: st.Outcome, InputTokens: st.InputTokens, OutputTokens: st.OutputTokens,
			CacheReadTokens: st.CacheReadTokens, CacheWriteTokens: st.CacheWriteTokens, Displayed: st.Displayed, Durable: st.Durable,
			Interrupted: st.Interrupted})
	}
	rec, ok, err := rt.RecoveredOutput(ctx, turn)
	if err != nil {
		return api.TurnInfo{}, err
	}
	if ok {
		out.Partial = partialOutput(&rec)
	}
	lat, err := rt.TurnLatency(ctx, branch, turn)
	if err != nil {
		return api.TurnInfo{}, err
	}
	out.Latency = turnLatency(lat)
	return out, nil
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	if err := s.rt.Cancel(r.Context(), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]bool{"cancelling": true})
	return nil
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 50, 1, MaxHistory)
	if err != nil {
		return err
	}
	var before messages.NodeID
	if b := r.URL.Query().Get("before"); b != "" {
		if before, err = messages.ParseID[messages.NodeID](b); err != nil {
			return invalid("before: %q is not a node id", b)
		}
	}
	entries, next, err := s.rt.History(r.Context(), id, before, limit)
	if err != nil {
		return err
	}
	out := api.History{Entries: []api.HistoryEntry{}}
	for _, e := range entries {
		out.Entries = append(out.Entries, HistoryEntry(e))
	}
	if !next.IsZero() {
		out.Before = &next
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) pin(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	var in api.PinRequest
	if err := decode(r, &in); err != nil {
		return err
	}
	p, err := s.rt.Pin(r.Context(), id, in.Fact)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, p)
	return nil
}

// pinID reads the {pin} path value: a pin's id, a positive integer.
func pinID(r *http.Request) (uint64, error) {
	v := r.PathValue("pin")
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, invalid("pin: %q is not a pin id (a positive integer; GET /v1/branches/{branch}/pins lists them)", v)
	}
	return n, nil
}

func (s *Server) listPins(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	p, err := pageOf(r, listPins, 8, false)
	if err != nil {
		return err
	}
	pins, err := s.rt.Pins(r.Context(), id)
	if err != nil {
		return err
	}
	slices.SortFunc(pins, func(a, b api.Pin) int { return cmp.Compare(a.ID, b.ID) })
	if p.after != nil {
		after := binary.BigEndian.Uint64(p.after)
		pins = pins[sort.Search(len(pins), func(i int) bool { return pins[i].ID > after }):]
	}
	out := api.PinList{Pins: pins[:min(len(pins), p.limit)]}
	if len(pins) > p.limit {
		out.Next = p.next(listPins, pinKey(pins[p.limit-1].ID))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) unpin(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	n, err := pinID(r)
	if err != nil {
		return err
	}
	if err := s.rt.Unpin(r.Context(), id, n); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]uint64{"unpinned": n})
	return nil
}

func (s *Server) editPin(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	n, err := pinID(r)
	if err != nil {
		return err
	}
	var in api.PinRequest
	if err := decode(r, &in); err != nil {
		return err
	}
	p, err := s.rt.EditPin(r.Context(), id, n, in.Fact)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) pending(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	p, err := pageOf(r, listPending, 8, false)
	if err != nil {
		return err
	}
	info, err := s.rt.Inspect(r.Context(), id)
	if err != nil {
		return err
	}
	var after uint64
	if p.after != nil {
		after = binary.BigEndian.Uint64(p.after)
	}
	out := api.PendingList{Pending: []api.PendingTurn{}}
	for _, t := range info.PendingTurns() { // oldest first, by seq
		if p.after != nil && t.Seq <= after {
			continue
		}
		if len(out.Pending) == p.limit {
			out.Next = p.next(listPending, binary.BigEndian.AppendUint64(nil, out.Pending[p.limit-1].Seq))
			break
		}
		out.Pending = append(out.Pending, api.PendingTurn{Turn: t.Turn, Seq: t.Seq, Phase: messages.PhaseResponseFinalized, Reply: t.Reply})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) commit(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	if err := s.rt.CommitPending(r.Context(), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]bool{"folding": true})
	return nil
}

// reindex runs indexing again over the branch's committed turns (ctxinf
// reindex through a running server): chunks are unique, so it inserts
// only what is missing.
func (s *Server) reindex(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	inserted, skipped, err := s.rt.Reindex(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.Reindexed{Inserted: inserted, Skipped: skipped})
	return nil
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	var in api.SearchRequest
	if err := decode(r, &in); err != nil {
		return err
	}
	switch {
	case in.Query == "" && len(in.Chunks) == 0:
		return invalid("query: required (or chunks, with force)")
	case len(in.Query) > MaxQueryBytes:
		return invalid("query: %d bytes, limit %d", len(in.Query), MaxQueryBytes)
	case in.K < 0 || in.K > MaxSearchK:
		return invalid("k: %d, want 0 (the default) to %d", in.K, MaxSearchK)
	case len(in.Chunks) > 0 && !in.Force:
		return invalid("chunks: only with force")
	case (in.Speaker != "" || in.From != "" || in.To != "") && in.Query == "":
		return invalid("speaker, from and to: only with a query")
	}
	filter, err := SearchFilter(in.Speaker, "from", in.From, "to", in.To)
	if err != nil {
		return err
	}
	opts := SearchK(s.rt, in.K)
	var chunks []messages.ChunkID
	for i, c := range in.Chunks {
		cid, err := messages.ParseID[messages.ChunkID](c)
		if err != nil {
			return invalid("chunks[%d]: %q is not a chunk id", i, c)
		}
		chunks = append(chunks, cid)
	}
	hits, forced, err := s.rt.SearchAndForce(r.Context(), id, in.Query, opts, filter, in.Force, chunks)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.SearchResult{Hits: Hits(hits), Forced: forced})
	return nil
}

// SearchFilter is the filter of a search for what speaker said (a
// role or a participant's name) from the RFC 3339 time from until to,
// each optional; its errors name the fields (fromField, toField).
func SearchFilter(speaker, fromField, from, toField, to string) (retrieval.Filter, error) {
	f := retrieval.Filter{Speaker: speaker}
	for _, t := range []struct {
		field, v string
		into     *time.Time
	}{{fromField, from, &f.From}, {toField, to, &f.To}} {
		if t.v == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339, t.v)
		if err != nil {
			return f, invalid("%s: %q is not an RFC 3339 time (2026-11-29T10:00:00Z)", t.field, t.v)
		}
		*t.into = at
	}
	if err := messages.CheckSpeaker(speaker); err != nil {
		return f, invalid("speaker: %v", err)
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return f, invalid("%s: %s is not before %s: %s", fromField, from, toField, to)
	}
	return f, nil
}

// SearchK is the ranking of a search for k hits on rt (nil, the
// runtime's own, for k 0), as the API's search runs it.
func SearchK(rt *actors.Runtime, k int) *retrieval.RankOptions {
	if k <= 0 {
		return nil
	}
	o := rt.RankOptions()
	o.TopK, o.MaxK, o.Overfetch = k, 0, max(o.Overfetch, k)
	return &o
}

func (s *Server) contextDebug(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	var d actors.ContextDebug
	q := r.URL.Query()
	var turn messages.TurnID
	switch t, n := q.Get("turn"), q.Get("seq"); {
	case t != "":
		if turn, err = messages.ParseID[messages.TurnID](t); err != nil {
			return invalid("turn: %q is not a turn id", t)
		}
	case n != "":
		// The turn by its number on the branch (ctxinf context debug --turn N).
		seq, err := strconv.ParseUint(n, 10, 64)
		if err != nil || seq == 0 {
			return invalid("seq: %q is not a turn number (1, 2, …)", n)
		}
		row, err := s.rt.TurnAt(r.Context(), id, seq)
		if err != nil {
			return err
		}
		turn = row.ID
	}
	if !turn.IsZero() {
		d, err = s.rt.DebugContext(r.Context(), id, turn)
		if err != nil {
			return err
		}
	} else {
		text := r.URL.Query().Get("text")
		if text == "" {
			text = "(the next message)"
		}
		if d, err = s.rt.DebugNextContext(r.Context(), id, text); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, ContextDebug(d))
	return nil
}

func (s *Server) selectModel(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	var in api.SelectModelRequest
	if err := decode(r, &in); err != nil {
		return err
	}
	if err := s.rt.SelectModel(r.Context(), id, in.Model); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"model": in.Model})
	return nil
}

func (s *Server) selectMemoryTools(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	var in api.SelectMemoryToolsRequest
	if err := decode(r, &in); err != nil {
		return err
	}
	m, err := parseMemoryTools("memory_tools", in.MemoryTools)
	if err != nil {
		return err
	}
	if err := s.rt.SelectMemoryTools(r.Context(), id, m); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]messages.MemoryTools{"memory_tools": m})
	return nil
}

// parseMemoryTools reads a memory tools setting given as field (a body
// field or a header): "default", "on" or "off".
func parseMemoryTools(field, text string) (messages.MemoryTools, error) {
	m, err := messages.ParseMemoryTools(text)
	if err != nil {
		return m, invalid("%s: %q is not a memory tools setting: want default, on or off", field, text)
	}
	return m, nil
}

// inspect is what `ctxinf inspect` prints, read from the store this
// server owns: every session and branch of the request's tenant, the
// last turns (turns=, default 5, at most MaxHistory) and their pending
// jobs.
func (s *Server) inspect(w http.ResponseWriter, r *http.Request) error {
	n, err := queryInt(r, "turns", 5, 0, MaxHistory)
	if err != nil {
		return err
	}
	p, err := pageOf(r, listInspect, 16, false)
	if err != nil {
		return err
	}
	sessions, more, err := s.sessionPage(r.Context(), p, nil)
	if err != nil {
		return err
	}
	rep, err := actors.BuildReportOfSessions(r.Context(), s.rt.DB(), s.rt.DataDir(), n, sessions)
	if err != nil {
		return err
	}
	out := Report(rep)
	if more {
		out.Next = p.next(listInspect, sessions[len(sessions)-1].ID[:])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// metadataFilter reads the metadata.KEY=VALUE (or metadata[KEY]=VALUE)
// parameters of a query: the metadata a listed session must have.
func metadataFilter(q url.Values) (map[string][]string, error) {
	var where map[string][]string
	for name, vs := range q {
		key, ok := strings.CutPrefix(name, "metadata.")
		if !ok {
			if k, ok2 := strings.CutPrefix(name, "metadata["); ok2 && strings.HasSuffix(k, "]") {
				key, ok = strings.TrimSuffix(k, "]"), true
			}
		}
		if !ok {
			continue
		}
		if key == "" {
			return nil, invalid("query parameter %q: names no metadata key (metadata.KEY=VALUE)", name)
		}
		if where == nil {
			where = map[string][]string{}
		}
		where[key] = append(where[key], vs...)
	}
	return where, nil
}

// matchesMetadata reports whether md has every key of where set to each
// of its values.
func matchesMetadata(md map[string]string, where map[string][]string) bool {
	for k, vs := range where {
		v, ok := md[k]
		for _, want := range vs {
			if !ok || v != want {
				return false
			}
		}
	}
	return true
}
