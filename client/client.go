// Package client is a Go client for the HTTP API of `ctxinf serve`:
// sessions, branches and forks, turns (waited for or streamed, and
// looked up), history, pins, pending turns and folds, retrieval, context
// debug, models, export and import.
//
//	c := client.New("http://127.0.0.1:8080")
//	_, branch, err := c.CreateSession(ctx, "support")
//	res, err := c.Send(ctx, branch.ID, "Hello")
//	fmt.Println(res.Reply)
package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
)

// Types of the API, from package api: the server writes these very
// types, so the two cannot drift apart.
type (
	Session       = api.Session
	Branch        = api.Branch
	BranchInfo    = api.BranchInfo
	Turn          = api.Turn
	TurnResult    = api.TurnResult
	Event         = api.Event
	TurnInfo      = api.TurnInfo
	PartialOutput = api.PartialOutput
	ChunkInfo     = api.ChunkInfo
	StepInfo      = api.StepInfo
	PendingTurn   = api.PendingTurn
	HistoryEntry  = api.HistoryEntry
	Imported      = api.Imported
	Deleted       = api.Deleted
	Hit           = api.Hit
	Model         = api.Model
	Retention     = api.Retention
	// Report is what `ctxinf inspect` prints (Inspect).
	Report = api.Report
	// SessionList, BranchList, PinList, PendingList and ModelList are
	// pages of the list routes.
	SessionList = api.SessionList
	BranchList  = api.BranchList
	PinList     = api.PinList
	PendingList = api.PendingList
	ModelList   = api.ModelList
	// ContextDebug is what Context, ContextOfTurn and NextContext
	// answer, decoded.
	ContextDebug = api.ContextDebug
)

// Client talks to one server. Its methods are safe for concurrent use.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends "Authorization: Bearer token" (servers bound beyond
// loopback require one).
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient makes the requests with hc (default: a client without a
// timeout, as turns stream for as long as the model takes; bound calls
// with their context).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// New returns a client of the server at baseURL (e.g.
// http://127.0.0.1:8080).
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), http: &http.Client{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Error is an error answer of the server: its HTTP status, its stable
// code (invalid_request, not_found, turn_in_flight, overloaded…) and its
// message, and for 409, 429 and 503 how long to wait before trying again.
// The error of a turn that failed also names the turn; Send returns it
// inside a *TurnError.
type Error struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration
	Turn       messages.TurnID
	// Accepted, on a time-out (504, code timeout) of a request that
	// stores something (a turn, a fork, an import), says whether the
	// server carried it out: false means nothing was stored and the
	// request may be sent again as it is; true that it is stored (Turn
	// names the turn); nil that it is not known yet: send it again
	// under the same idempotency key, or look the turn up (Turn).
	Accepted *bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("ctxinf: %d %s: %s", e.Status, e.Code, e.Message)
}

// The codes of a turn the server accepted and that then failed
// (TurnError.Code).
const (
	CodeContextTooLarge = api.CodeContextTooLarge // the context does not fit the model's window; the message names the sections and the keys to change
	CodeCancelled       = api.CodeCancelled       // the turn was cancelled (Cancel)
	CodeProvider        = api.CodeProvider        // the model's provider failed (a 5xx after the server's retries, a dropped stream)
	// The model's provider answered with an error whose meaning the
	// server keeps (its status: 429, 400, 404, 502, 503).
	CodeProviderRateLimited   = api.CodeProviderRateLimited   // the provider rate limits the server; Retry-After says when to try again
	CodeProviderRejected      = api.CodeProviderRejected      // the provider refused the request's content; the message is the provider's
	CodeProviderModelNotFound = api.CodeProviderModelNotFound // the provider does not know the model
	CodeProviderAuth          = api.CodeProviderAuth          // the provider refused the server's own key for it (not the client's)
	CodeProviderOverloaded    = api.CodeProviderOverloaded    // the provider stayed overloaded through the server's retries
	CodeInterrupted           = api.CodeInterrupted           // the server stopped or restarted during the turn
	CodeProviderTimeout       = api.CodeProviderTimeout       // the provider took longer than runtime.provider_timeout
	CodeTurnFailed            = api.CodeTurnFailed            // another cause, which the message names
)

// TurnError is returned by Send and Stream for a turn the server accepted
// and that then failed or was cancelled: the turn, its phase (failed),
// its outcome (kind failed or cancelled, with the code and the reason),
// and Code and Message, the outcome's code and reason. From Send it
// wraps the server's *Error (Status is its HTTP status: 422, 409, 429, 400, 404, 502,
// 503, 504 or 500); from Stream, whose answer began with 200 and whose
// done event said why, Status is 0.
type TurnError struct {
	Turn    messages.TurnID
	Phase   messages.TurnPhase
	Outcome messages.StepOutcome
	Code    string
	Message string
	Status  int
	err     *Error
}

func (e *TurnError) Error() string {
	return fmt.Sprintf("ctxinf: turn %s %s (%s): %s", e.Turn, e.Outcome.Kind, e.Code, e.Message)
}

// Unwrap returns the server's error answer, if the error is Send's.
func (e *TurnError) Unwrap() error {
	if e.err == nil {
		return nil
	}
	return e.err
}

// IsCancelled reports whether err says a turn was cancelled.
func IsCancelled(err error) bool {
	var e *TurnError
	return errors.As(err, &e) && e.Code == CodeCancelled
}

// IsBusy reports whether err says the branch has a turn in flight.
func IsBusy(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == api.CodeBusy
}

type idempotencyKey struct{}

// WithIdempotencyKey returns ctx carrying an idempotency key (1 to 255
// printable ASCII characters, e.g. NewIdempotencyKey()): Send, Stream,
// Fork and Import called with it send it (the Idempotency-Key header),
// and the server answers a request sent again under the same key with
// what the first made, storing nothing new (a turn still running is
// followed as it streams). Use one key per request, and the same one
// for its retries: the same key with another text, fork point, label
// or import is refused (IsKeyReused). Keys are kept for good.
//
//	ctx := client.WithIdempotencyKey(ctx, client.NewIdempotencyKey())
//	res, err := c.Send(ctx, branch, "Hello") // safe to call again with ctx
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKey{}, key)
}

// NewIdempotencyKey returns a new random idempotency key.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// NotAccepted reports whether err is a time-out whose answer says the
// request was not carried out: nothing was stored, and sending it again
// cannot duplicate it.
func NotAccepted(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Accepted != nil && !*e.Accepted
}

// IsKeyReused reports whether err says the idempotency key was first
// sent with another request.
func IsKeyReused(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == api.CodeKeyReused
}

// IsNotFound reports whether err says what was asked for does not exist.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

func (c *Client) request(ctx context.Context, method, path string, in any, accept string) (*http.Response, error) {
	if in == nil {
		return c.send(ctx, method, path, nil, "", accept)
	}
	data, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	return c.send(ctx, method, path, bytes.NewReader(data), "application/json", accept)
}

// send makes a request with body (of contentType; nil: none) and returns
// the answer, or the server's error as an *Error.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, contentType, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if k, ok := ctx.Value(idempotencyKey{}).(string); ok && method == "POST" {
		req.Header.Set("Idempotency-Key", k)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		var e api.ErrorAnswer
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		out := &Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: strings.TrimSpace(string(data))}
		if json.Unmarshal(data, &e) == nil && e.Error.Code != "" {
			out.Code, out.Message, out.Turn, out.Accepted = e.Error.Code, e.Error.Message, e.Error.Turn, e.Error.Accepted
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			out.RetryAfter = time.Duration(s) * time.Second
		}
		return nil, out
	}
	return resp, nil
}

// do sends a JSON request and decodes the JSON answer into out (if not
// nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.request(ctx, method, path, in, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// CreateSession creates a session and its main branch.
func (c *Client) CreateSession(ctx context.Context, title string) (Session, Branch, error) {
	var out api.CreatedSession
	err := c.do(ctx, "POST", "/v1/sessions", api.CreateSessionRequest{Title: title}, &out)
	return out.Session, out.Branch, err
}

// Page asks a list route for one page: up to Limit rows (0: the
// server's default, api.DefaultListLimit; at most api.MaxListLimit),
// after Cursor (the Next of the page before; "" for the first page).
type Page struct {
	Limit  int
	Cursor string
	// Newest lists sessions newest first (SessionPage only).
	Newest bool
	// Metadata keeps the sessions whose metadata has each key set to its
	// value (SessionPage only).
	Metadata map[string]string
}

// query is p's query string ("" or "?...").
func (p Page) query(extra url.Values) string {
	q := extra
	if q == nil {
		q = url.Values{}
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	if p.Newest {
		q.Set("order", "newest")
	}
	for k, v := range p.Metadata {
		q.Set("metadata."+k, v)
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// Session returns a session of the client's tenant (GET
// /v1/sessions/{session}).
func (c *Client) Session(ctx context.Context, id messages.SessionID) (Session, error) {
	var out Session
	err := c.do(ctx, "GET", "/v1/sessions/"+id.String(), nil, &out)
	return out, err
}

// SessionPage lists one page of the sessions of the client's tenant
// (GET /v1/sessions): pass its Next as the next call's Cursor.
func (c *Client) SessionPage(ctx context.Context, p Page) (SessionList, error) {
	var out SessionList
	err := c.do(ctx, "GET", "/v1/sessions"+p.query(nil), nil, &out)
	return out, err
}

// Sessions lists every session of the client's tenant, reading page after
// page (SessionPage reads one).
func (c *Client) Sessions(ctx context.Context) ([]Session, error) {
	return c.SessionsWhere(ctx, nil)
}

// SessionsWhere lists the sessions whose metadata (Session.Metadata)
// has each key of metadata set to its value, every page: SessionsWhere(ctx,
// map[string]string{"source": "proxy", "end_user": "alice"}) lists the
// proxy's conversations of the end user alice.
func (c *Client) SessionsWhere(ctx context.Context, metadata map[string]string) ([]Session, error) {
	var all []Session
	p := Page{Limit: api.MaxListLimit, Metadata: metadata}
	for {
		out, err := c.SessionPage(ctx, p)
		all = append(all, out.Sessions...)
		if err != nil || out.Next == "" {
			return all, err
		}
		p.Cursor = out.Next
	}
}

// BranchPage lists one page of a session's branches.
func (c *Client) BranchPage(ctx context.Context, session messages.SessionID, p Page) (BranchList, error) {
	var out BranchList
	err := c.do(ctx, "GET", "/v1/sessions/"+session.String()+"/branches"+p.query(nil), nil, &out)
	return out, err
}

// Branches lists a session's branches, every page.
func (c *Client) Branches(ctx context.Context, session messages.SessionID) ([]Branch, error) {
	var all []Branch
	p := Page{Limit: api.MaxListLimit}
	for {
		out, err := c.BranchPage(ctx, session, p)
		all = append(all, out.Branches...)
		if err != nil || out.Next == "" {
			return all, err
		}
		p.Cursor = out.Next
	}
}

// Branch returns a branch's live state.
func (c *Client) Branch(ctx context.Context, branch messages.BranchID) (BranchInfo, error) {
	var out BranchInfo
	err := c.do(ctx, "GET", "/v1/branches/"+branch.String(), nil, &out)
	return out, err
}

// Fork creates a branch of branch that continues after turn at (zero:
// after the head).
func (c *Client) Fork(ctx context.Context, branch messages.BranchID, at messages.NodeID, label string) (Branch, error) {
	in := api.ForkRequest{Label: label}
	if !at.IsZero() {
		in.At = at.String()
	}
	var out Branch
	err := c.do(ctx, "POST", "/v1/branches/"+branch.String()+"/forks", in, &out)
	return out, err
}

// Record records an exchange that happened elsewhere, the user's message
// and the reply its model gave, on the branch as a finished turn (POST
// /v1/branches/{id}/exchanges); with WithIdempotencyKey, a repeat returns
// the turn the first recorded.
func (c *Client) Record(ctx context.Context, branch messages.BranchID, user, reply string) (PendingTurn, error) {
	var out PendingTurn
	err := c.do(ctx, "POST", "/v1/branches/"+branch.String()+"/exchanges", api.ExchangeRequest{User: user, Reply: reply}, &out)
	return out, err
}

// Send runs a turn and waits for its end. A turn that fails or is
// cancelled returns a *TurnError, with the result's turn, phase, outcome
// and error set.
func (c *Client) Send(ctx context.Context, branch messages.BranchID, text string) (TurnResult, error) {
	var out TurnResult
	err := c.do(ctx, "POST", "/v1/branches/"+branch.String()+"/turns", api.TurnRequest{Text: text}, &out)
	var e *Error
	if errors.As(err, &e) && !e.Turn.IsZero() {
		te := &TurnError{Turn: e.Turn, Phase: messages.PhaseFailed, Outcome: messages.FailedOutcome(e.Code, e.Message),
			Code: e.Code, Message: e.Message, Status: e.Status, err: e}
		out.Turn, out.Phase, out.Outcome, out.Error = te.Turn, te.Phase, te.Outcome, te.Message
		return out, te
	}
	return out, err
}

// Stream runs a turn and calls fn with each of its events as the server
// sends them; it returns the turn's result at the end. An error from fn
// stops reading (the turn goes on on the server). A turn that fails or
// is cancelled returns its result (what streamed of the reply) and a
// *TurnError saying why.
func (c *Client) Stream(ctx context.Context, branch messages.BranchID, text string, fn func(Event) error) (TurnResult, error) {
	resp, err := c.request(ctx, "POST", "/v1/branches/"+branch.String()+"/turns",
		api.TurnRequest{Text: text, Stream: true}, "text/event-stream")
	if err != nil {
		return TurnResult{}, err
	}
	defer resp.Body.Close()
	var res TurnResult
	var reply strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var raw struct {
			Turn          messages.TurnID      `json:"turn"`
			Seq           uint64               `json:"seq"`
			Text          string               `json:"text"`
			Item          json.RawMessage      `json:"item"`
			Displayed     uint64               `json:"displayed"`
			Durable       uint64               `json:"durable"`
			TextDisplayed uint64               `json:"text_displayed"`
			TextDurable   uint64               `json:"text_durable"`
			Phase         messages.TurnPhase   `json:"phase"`
			Outcome       messages.StepOutcome `json:"outcome"`
			Error         json.RawMessage      `json:"error"` // done: a string; error: {"code", "message"}
			Code          string               `json:"code"`
		}
		if err := json.Unmarshal([]byte(data), &raw); err != nil {
			return res, fmt.Errorf("ctxinf: bad %s event %q: %w", event, data, err)
		}
		if event == "error" {
			e := &Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: data}
			var body struct{ Code, Message string }
			if json.Unmarshal(raw.Error, &body) == nil && body.Code != "" {
				e.Code, e.Message = body.Code, body.Message
			}
			return res, e
		}
		var errText string
		if len(raw.Error) > 0 {
			if err := json.Unmarshal(raw.Error, &errText); err != nil {
				return res, fmt.Errorf("ctxinf: bad %s event %q: %w", event, data, err)
			}
		}
		ev := Event{Type: event, Turn: raw.Turn, Text: raw.Text, Item: raw.Item, Displayed: raw.Displayed, Durable: raw.Durable,
			TextDisplayed: raw.TextDisplayed, TextDurable: raw.TextDurable,
			Phase: raw.Phase, Outcome: raw.Outcome, Error: errText, Code: raw.Code}
		switch event {
		case "turn":
			res.Turn, res.Seq = raw.Turn, raw.Seq
			ev.Turn = raw.Turn
		case "delta":
			reply.WriteString(raw.Text)
		case "done":
			res.Phase, res.Outcome, res.Error = raw.Phase, raw.Outcome, errText
		}
		res.Displayed, res.Durable = max(res.Displayed, raw.Displayed), max(res.Durable, raw.Durable)
		res.TextDisplayed, res.TextDurable = max(res.TextDisplayed, raw.TextDisplayed), max(res.TextDurable, raw.TextDurable)
		if fn != nil {
			if err := fn(ev); err != nil {
				return res, err
			}
		}
	}
	res.Reply = reply.String()
	if err := sc.Err(); err != nil {
		return res, err
	}
	switch res.Phase {
	case 0:
		return res, errors.New("ctxinf: the stream ended before the turn did")
	case messages.PhaseFailed:
		o := res.Outcome
		if o.Kind == 0 { // a server from before outcomes of failed turns
			o = messages.FailedOutcome("", res.Error)
		}
		return res, &TurnError{Turn: res.Turn, Phase: res.Phase, Outcome: o, Code: o.Code, Message: res.Error}
	}
	return res, nil
}

// Turn returns a turn of the branch: its phase, reply and steps.
func (c *Client) Turn(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (TurnInfo, error) {
	var out TurnInfo
	err := c.do(ctx, "GET", "/v1/branches/"+branch.String()+"/turns/"+turn.String(), nil, &out)
	return out, err
}

// Pending returns the branch's pending turns, oldest first, reading
// every page (PendingPage reads one).
func (c *Client) Pending(ctx context.Context, branch messages.BranchID) ([]PendingTurn, error) {
	var all []PendingTurn
	p := Page{Limit: api.MaxListLimit}
	for {
		out, err := c.PendingPage(ctx, branch, p)
		all = append(all, out.Pending...)
		if err != nil || out.Next == "" {
			return all, err
		}
		p.Cursor = out.Next
	}
}

// PendingPage lists one page of a branch's pending turns, oldest first.
func (c *Client) PendingPage(ctx context.Context, branch messages.BranchID, p Page) (PendingList, error) {
	var out PendingList
	err := c.do(ctx, "GET", "/v1/branches/"+branch.String()+"/pending"+p.query(nil), nil, &out)
	return out, err
}

// Export writes the session's export to w: JSON lines (format 2, see
// the README's "Export and import"), every branch with its fork point,
// turns, states and pinned facts, and an end line with counts and a
// SHA-256 of the lines before it. A server that fails partway cuts the
// connection, and Export returns an error.
func (c *Client) Export(ctx context.Context, session messages.SessionID, w io.Writer) error {
	resp, err := c.send(ctx, "GET", "/v1/sessions/"+session.String()+"/export", nil, "", "application/x-ndjson")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}

// DeleteSession deletes a session and every branch of it, for good: its
// turns, summaries, pins, chunks, provider requests and responses,
// stream journals and the proxy's and idempotency keys' entries.
func (c *Client) DeleteSession(ctx context.Context, id messages.SessionID) (Deleted, error) {
	var out Deleted
	err := c.do(ctx, "DELETE", "/v1/sessions/"+id.String(), nil, &out)
	return out, err
}

// DeleteBranch deletes a branch for good, as DeleteSession does a
// session. A branch with forks (they share its turns) or a session's
// first branch is refused (409): delete the forks first, or the session.
func (c *Client) DeleteBranch(ctx context.Context, id messages.BranchID) (Deleted, error) {
	var out Deleted
	err := c.do(ctx, "DELETE", "/v1/branches/"+id.String(), nil, &out)
	return out, err
}

// Import makes a new session of an export read from r (Export's format,
// or format 1), streamed: no model is called, and the session is listed
// only once all of it is stored (a failure or a crash leaves none).
func (c *Client) Import(ctx context.Context, r io.Reader) (Imported, error) {
	var out Imported
	resp, err := c.send(ctx, "POST", "/v1/sessions/import", r, "application/x-ndjson", "")
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// Cancel cancels the branch's turn in flight.
func (c *Client) Cancel(ctx context.Context, branch messages.BranchID) error {
	return c.do(ctx, "POST", "/v1/branches/"+branch.String()+"/cancel", nil, nil)
}

// History returns up to limit messages of the branch's transcript before
// node before (zero: up to the head), oldest first, and the cursor of the
// page before them (zero at the start).
func (c *Client) History(ctx context.Context, branch messages.BranchID, before messages.NodeID, limit int) ([]HistoryEntry, messages.NodeID, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if !before.IsZero() {
		q.Set("before", before.String())
	}
	var out api.History
	err := c.do(ctx, "GET", "/v1/branches/"+branch.String()+"/history?"+q.Encode(), nil, &out)
	var page messages.TurnID
	if out.Before != nil {
		page = *out.Before
	}
	return out.Entries, page, err
}

// Pin is a fact pinned on a branch: ID (what Unpin and EditPin take),
// Fact, and the branch's turn_seq (Seq) and time (At) when it was pinned
// or last edited.
type Pin = api.Pin

// Pin pins a fact: kept verbatim in every later context of the branch,
// until it is unpinned. It returns the pin; a fact pinned already
// returns its pin. A fact over the server's limits (context.max_pins,
// context.max_pin_bytes, context.max_pinned_share) is refused with a 400
// naming the limit.
func (c *Client) Pin(ctx context.Context, branch messages.BranchID, fact string) (Pin, error) {
	var out Pin
	err := c.do(ctx, "POST", "/v1/branches/"+branch.String()+"/pins", api.PinRequest{Fact: fact}, &out)
	return out, err
}

// Pins lists the facts pinned on the branch now, by id.
func (c *Client) Pins(ctx context.Context, branch messages.BranchID) ([]Pin, error) {
	var all []Pin
	p := Page{Limit: api.MaxListLimit}
	for {
		out, err := c.PinPage(ctx, branch, p)
		all = append(all, out.Pins...)
		if err != nil || out.Next == "" {
			return all, err
		}
		p.Cursor = out.Next
	}
}

// PinPage lists one page of a branch's pins, in the order of their ids.
func (c *Client) PinPage(ctx context.Context, branch messages.BranchID, p Page) (PinList, error) {
	var out PinList
	err := c.do(ctx, "GET", "/v1/branches/"+branch.String()+"/pins"+p.query(nil), nil, &out)
	return out, err
}

// Unpin unpins pin id: later contexts of the branch no longer show it. An
// id not pinned is a 404.
func (c *Client) Unpin(ctx context.Context, branch messages.BranchID, id uint64) error {
	return c.do(ctx, "DELETE", "/v1/branches/"+branch.String()+"/pins/"+strconv.FormatUint(id, 10), nil, nil)
}

// EditPin replaces the text of pin id, which keeps its id and place, and
// returns the pin. The limits of Pin apply.
func (c *Client) EditPin(ctx context.Context, branch messages.BranchID, id uint64, fact string) (Pin, error) {
	var out Pin
	err := c.do(ctx, "PUT", "/v1/branches/"+branch.String()+"/pins/"+strconv.FormatUint(id, 10), api.PinRequest{Fact: fact}, &out)
	return out, err
}

// Commit folds every pending turn into the branch's summary now.
func (c *Client) Commit(ctx context.Context, branch messages.BranchID) error {
	return c.do(ctx, "POST", "/v1/branches/"+branch.String()+"/commit", nil, nil)
}

// Reindex runs indexing again over the branch's committed turns; it
// returns the chunks inserted and those already indexed.
func (c *Client) Reindex(ctx context.Context, branch messages.BranchID) (inserted, skipped int, err error) {
	var out api.Reindexed
	err = c.do(ctx, "POST", "/v1/branches/"+branch.String()+"/reindex", nil, &out)
	return out.Inserted, out.Skipped, err
}

// Search runs the hybrid retrieval of the branch (k hits; 0 is the
// server's default); with force, the hits go into the next turn.
func (c *Client) Search(ctx context.Context, branch messages.BranchID, query string, k int, force bool) ([]Hit, error) {
	var out api.SearchResult
	err := c.do(ctx, "POST", "/v1/branches/"+branch.String()+"/search",
		api.SearchRequest{Query: query, K: k, Force: force}, &out)
	return out.Hits, err
}

// SearchOptions are the ways of SearchWith: K hits (0: the server's
// default); with Force the hits, or the chunks named (with no query), go
// into the branch's next turn. Speaker, From and To keep only what a
// speaker said ("user", "assistant", "tool" or a participant's name) and
// what was said from From until To (RFC 3339), as the search looks (it
// returns up to K of those).
type SearchOptions struct {
	K       int
	Force   bool
	Chunks  []messages.ChunkID
	Speaker string
	From    string
	To      string
}

// SearchWith is Search with options; it also returns how many chunks were
// forced into the next turn.
func (c *Client) SearchWith(ctx context.Context, branch messages.BranchID, query string, o SearchOptions) ([]Hit, int, error) {
	in := api.SearchRequest{Query: query, K: o.K, Force: o.Force, Speaker: o.Speaker, From: o.From, To: o.To}
	for _, id := range o.Chunks {
		in.Chunks = append(in.Chunks, id.String())
	}
	var out api.SearchResult
	err := c.do(ctx, "POST", "/v1/branches/"+branch.String()+"/search", in, &out)
	return out.Hits, out.Forced, err
}

// ContextOfTurn is Context for the turn numbered seq on the branch.
func (c *Client) ContextOfTurn(ctx context.Context, branch messages.BranchID, seq uint64) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.do(ctx, "GET", fmt.Sprintf("/v1/branches/%s/context?seq=%d", branch, seq), nil, &out)
	return out, err
}

// NextContext is the context the branch's next turn would get for the
// user message text.
func (c *Client) NextContext(ctx context.Context, branch messages.BranchID, text string) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.do(ctx, "GET", "/v1/branches/"+branch.String()+"/context?text="+url.QueryEscape(text), nil, &out)
	return out, err
}

// URL is the server's base URL.
func (c *Client) URL() string { return c.base }

// Models lists the models a branch can select: "default" first, then
// each configured model, reading every page (ModelPage reads one).
func (c *Client) Models(ctx context.Context) ([]Model, error) {
	var all []Model
	p := Page{Limit: api.MaxListLimit}
	for {
		out, err := c.ModelPage(ctx, p)
		all = append(all, out.Data...)
		if err != nil || out.Next == "" {
			return all, err
		}
		p.Cursor = out.Next
	}
}

// ModelPage lists one page of the models a branch can select.
func (c *Client) ModelPage(ctx context.Context, p Page) (ModelList, error) {
	var out ModelList
	err := c.do(ctx, "GET", "/v1/models"+p.query(nil), nil, &out)
	return out, err
}

// TurnNumber is Turn for the branch's turn number seq (1, 2, …).
func (c *Client) TurnNumber(ctx context.Context, branch messages.BranchID, seq uint64) (TurnInfo, error) {
	var out TurnInfo
	err := c.do(ctx, "GET", fmt.Sprintf("/v1/branches/%s/turns/%d", branch, seq), nil, &out)
	return out, err
}

// Inspect returns what `ctxinf inspect` prints of the server's store,
// with up to turns last turns of each branch, reading every page of
// sessions (InspectPage reads one).
func (c *Client) Inspect(ctx context.Context, turns int) (Report, error) {
	var all Report
	p := Page{Limit: api.MaxListLimit}
	for {
		out, err := c.InspectPage(ctx, turns, p)
		all.DataDir = out.DataDir
		all.Sessions = append(all.Sessions, out.Sessions...)
		all.Jobs = append(all.Jobs, out.Jobs...)
		if err != nil || out.Next == "" {
			if all.Sessions == nil {
				all.Sessions = []api.ReportSession{}
			}
			if all.Jobs == nil {
				all.Jobs = []api.Job{}
			}
			return all, err
		}
		p.Cursor = out.Next
	}
}

// InspectPage is one page of Inspect's sessions, with their branches' jobs.
func (c *Client) InspectPage(ctx context.Context, turns int, p Page) (Report, error) {
	var out Report
	err := c.do(ctx, "GET", "/v1/inspect"+p.query(url.Values{"turns": {strconv.Itoa(turns)}}), nil, &out)
	return out, err
}

// Context returns the exact context the model saw for turn (zero: the one
// the next turn would get), as the server's JSON.
func (c *Client) Context(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (json.RawMessage, error) {
	path := "/v1/branches/" + branch.String() + "/context"
	if !turn.IsZero() {
		path += "?turn=" + turn.String()
	}
	var out json.RawMessage
	err := c.do(ctx, "GET", path, nil, &out)
	return out, err
}

// SelectModel selects the model of the branch's next turns by its name
// in the server's config.
func (c *Client) SelectModel(ctx context.Context, branch messages.BranchID, model string) error {
	return c.do(ctx, "PUT", "/v1/branches/"+branch.String()+"/model", api.SelectModelRequest{Model: model}, nil)
}

// SelectMemoryTools sets whether the branch's next turns are offered the
// server's memory tools: messages.MemoryToolsOn or MemoryToolsOff
// whatever the server's config says, MemoryToolsDefault as it says. A
// turn in flight keeps its setting; a fork starts with its parent's.
// BranchInfo shows the setting and whether it turns them on.
func (c *Client) SelectMemoryTools(ctx context.Context, branch messages.BranchID, m messages.MemoryTools) error {
	return c.do(ctx, "PUT", "/v1/branches/"+branch.String()+"/memory_tools", api.SelectMemoryToolsRequest{MemoryTools: m.String()}, nil)
}

// Retention returns session id's retention and last activity.
func (c *Client) Retention(ctx context.Context, id messages.SessionID) (Retention, error) {
	var out Retention
	err := c.do(ctx, "GET", "/v1/sessions/"+id.String()+"/retention", nil, &out)
	return out, err
}

// SetRetention sets session id's own retention ("30d", "36h", "0": kept
// forever); nil returns it to its tenant's.
func (c *Client) SetRetention(ctx context.Context, id messages.SessionID, idle *string) (Retention, error) {
	var out Retention
	err := c.do(ctx, "PUT", "/v1/sessions/"+id.String()+"/retention", api.RetentionRequest{Idle: idle}, &out)
	return out, err
}
