package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/messages"
)

// SDK retries of proxied requests. The OpenAI and Anthropic SDKs send a
// request again when its answer does not come (a timeout, a connection
// cut) or is a 429 or a 5xx, and mark each attempt after the first with
// X-Stainless-Retry-Count; they send no Idempotency-Key. So the proxy
// gives every request without one a key of its own (ctx-retry-<digest>-
// <nonce>, the turn's idempotency key), and remembers, for a minute after
// the request ended (and while it runs), which key and conversation the
// request's digest (tenant, route, conversation headers, body) went to.
// An attempt marked as a retry with the same digest gets them: it is the
// same turn, answered as a repeat under an Idempotency-Key is (the turn's
// stream, a follower while it runs, or how it ended), not a new
// conversation with a turn of its own. An attempt whose first failed (its
// turn failed, or it was refused) runs again: the failure is forgotten,
// and the conversation the first made dropped. The same body without the
// mark is a new turn: a user may say the same thing twice.

// RetryCountHeader marks an SDK's retry of a request: the attempt's
// number, 1 for the first retry.
const RetryCountHeader = "X-Stainless-Retry-Count"

// retryWindow is how long after a request ended its retries are the
// same turn.
const retryWindow = time.Minute

// retryKeyPrefix starts the idempotency keys the proxy gives requests.
const retryKeyPrefix = "ctx-retry-"

// proxyRetries are the requests whose retries are the same turn, by
// digest (requestDigest).
type proxyRetries struct {
	mu     sync.Mutex
	m      map[[32]byte]*retryTurn
	pruned time.Time // when expired entries were last removed
}

// retryTurn is a request's turn, for its retries: its idempotency key
// and, once settled (ready closed), whether its turn was submitted (ok)
// and on which conversation.
type retryTurn struct {
	digest [32]byte
	key    string
	ready  chan struct{}
	ok     bool
	conv   conversation
	users  int       // the requests running with it: the first and its retries
	ended  time.Time // when the last of them ended, once users is 0
}

// begin enters a new turn for digest d: the request with that digest
// that came last is the one its retries are.
func (rs *proxyRetries) begin(d [32]byte, now time.Time) *retryTurn {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	t := &retryTurn{digest: d, key: retryKeyPrefix + hex.EncodeToString(d[:12]) + "-" + hex.EncodeToString(nonce[:]),
		ready: make(chan struct{}), users: 1}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil {
		rs.m = map[[32]byte]*retryTurn{}
	}
	if now.Sub(rs.pruned) > retryWindow/4 {
		rs.pruned = now
		for k, e := range rs.m {
			if e.users == 0 && now.Sub(e.ended) > retryWindow {
				delete(rs.m, k)
			}
		}
	}
	rs.m[d] = t
	return t
}

// join returns the turn a retry with digest d is, nil if none: one that
// runs, or ended less than retryWindow ago.
func (rs *proxyRetries) join(d [32]byte, now time.Time) *retryTurn {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	t := rs.m[d]
	if t == nil {
		return nil
	}
	if t.users == 0 && now.Sub(t.ended) > retryWindow {
		delete(rs.m, d)
		return nil
	}
	t.users++
	return t
}

// settle says whether t's turn was submitted (ok), on conv; a turn
// that was not is forgotten: its retries run again.
func (rs *proxyRetries) settle(t *retryTurn, ok bool, conv conversation) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	t.ok, t.conv = ok, conv
	close(t.ready)
	if !ok {
		rs.forget(t)
	}
}

// leave ends a request running with t at now; failed says its turn
// failed, which forgets t. It reports whether no other request runs
// with t.
func (rs *proxyRetries) leave(t *retryTurn, now time.Time, failed bool) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	t.users--
	if t.users == 0 {
		t.ended = now
	}
	if failed {
		rs.forget(t)
	}
	return t.users == 0
}

// forget removes t, if it is its digest's; rs.mu is held.
func (rs *proxyRetries) forget(t *retryTurn) {
	if rs.m[t.digest] == t {
		delete(rs.m, t.digest)
	}
}

// isRetry reports whether r is marked as an SDK's retry.
func isRetry(r *http.Request) bool {
	n, err := strconv.Atoi(r.Header.Get(RetryCountHeader))
	return err == nil && n >= 1
}

// bodyDigestKey is the context key of a request's body hash
// (digestBody).
type bodyDigestKey struct{}

// digestBody serves a proxied route with h, hashing the request's body
// as h reads it, for requestDigest.
func digestBody(h func(*Server, http.ResponseWriter, *http.Request) error) func(*Server, http.ResponseWriter, *http.Request) error {
	return func(s *Server, w http.ResponseWriter, r *http.Request) error {
		if r.Body == nil {
			return h(s, w, r)
		}
		sum := sha256.New()
		body := r.Body
		r = r.WithContext(context.WithValue(r.Context(), bodyDigestKey{}, sum))
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(body, sum), body}
		return h(s, w, r)
	}
}

// requestDigest is what tells a request from another for its retries:
// its tenant, route, conversation headers (X-Ctx-Branch,
// X-Ctx-Conversation) and body, read whole already; ok is false for a
// request whose body was not hashed (digestBody).
func requestDigest(r *http.Request) (d [32]byte, ok bool) {
	body, ok := r.Context().Value(bodyDigestKey{}).(hash.Hash)
	if !ok {
		return d, false
	}
	h := sha256.New()
	var buf []byte
	for _, s := range []string{tenantOf(r.Context()), r.URL.Path, r.Header.Get(ProxyBranchHeader), r.Header.Get(ProxyConversationHeader)} {
		buf = binary.AppendUvarint(buf[:0], uint64(len(s)))
		h.Write(append(buf, s...))
	}
	h.Write(body.Sum(nil))
	h.Sum(d[:0])
	return d, true
}

// proxySubmit submits a proxied request's turn: it is what the handlers
// hand to startProxyTurn, given the conversation found (its Key is the
// idempotency key to submit under).
type proxySubmit func(conv conversation) (*actors.TurnStream, func(), error)

// startProxyTurn finds the conversation of a proxied request q tells of
// (findConversationFor) and submits its turn there: it returns the
// turn's stream, the function to call once the request is done with it,
// and the conversation. A request without an Idempotency-Key gets a key
// of the proxy's; an SDK's retry of a request that runs or ran less than
// retryWindow ago is that request's turn (proxyRetries).
//
// A conversation made for the request that nothing names yet is dropped
// (dropConversation) when the submission fails, or when its turn fails:
// failed requests leave no sessions behind.
func (s *Server) startProxyTurn(r *http.Request, q convQuery, submit proxySubmit) (*actors.TurnStream, func(), conversation, error) {
	idem, err := idempotencyKey(r)
	if err != nil {
		return nil, nil, conversation{}, err
	}
	d, digested := requestDigest(r)
	if !digested || idem != "" {
		conv, err := s.findConversationFor(r, q)
		if err != nil {
			return nil, nil, conv, err
		}
		conv.Key = idem
		return s.runProxyTurn(r, nil, false, conv, submit)
	}
	if isRetry(r) {
		if t := s.proxy.retries.join(d, time.Now()); t != nil {
			select {
			case <-t.ready:
			case <-r.Context().Done():
				s.proxy.retries.leave(t, time.Now(), false)
				return nil, nil, conversation{}, r.Context().Err()
			}
			if t.ok {
				// The same turn, on the conversation the first made
				// or found: it is the first's to drop.
				conv := t.conv
				conv.Created = false
				return s.runProxyTurn(r, t, true, conv, submit)
			}
			s.proxy.retries.leave(t, time.Now(), false)
		}
	}
	t := s.proxy.retries.begin(d, time.Now())
	conv, err := s.findConversationFor(r, q)
	if err != nil {
		s.proxy.retries.settle(t, false, conversation{})
		return nil, nil, conv, err
	}
	conv.Key = t.key
	st, leave, conv, err := s.runProxyTurn(r, t, false, conv, submit)
	s.proxy.retries.settle(t, err == nil, conv)
	return st, leave, conv, err
}

// runProxyTurn submits the request's turn on conv, for the requests
// running with t (nil if none; retry: the request is a retry of t's
// first), and returns what startProxyTurn does. A first submission that
// fails drops conv when droppable; the returned leave, once the turn
// failed, does too, when no other request runs with t (the last one out
// drops it), and forgets t.
func (s *Server) runProxyTurn(r *http.Request, t *retryTurn, retry bool, conv conversation, submit proxySubmit) (*actors.TurnStream, func(), conversation, error) {
	st, leave, err := submit(conv)
	if err != nil {
		if retry {
			s.proxy.retries.leave(t, time.Now(), false)
		} else if conv.droppable {
			s.dropConversation(r.Context(), conv)
		}
		return nil, nil, conv, err
	}
	return st, func() {
		leave()
		last, done := st.Last()
		failed := done && last.Phase == messages.PhaseFailed
		alone := true
		if t != nil {
			alone = s.proxy.retries.leave(t, time.Now(), failed)
		}
		if failed && conv.droppable && alone {
			s.dropConversation(r.Context(), conv)
		}
	}, conv, nil
}
