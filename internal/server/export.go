package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/export"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// The export format, its lines and the writer of an export are package
// export's; this file serves them and imports them.

const importPath = "/v1/sessions/import"

func (s *Server) exportSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID[messages.SessionID](r, "session")
	if err != nil {
		return err
	}
	sess, err := s.ownSession(r.Context(), id)
	if err != nil {
		return err
	}
	// Streamed as it is read: an export of any length holds a page in
	// memory. Until the first line goes out a failure is an error reply;
	// after it, the connection is cut, so that the client sees a broken
	// stream (and an import refuses it: no end line) rather than an
	// export that looks whole.
	bw := bufio.NewWriter(w)
	ex := export.NewWriter(bw, sess.Title, sess.Created, sess.ActiveBranch)
	w.Header().Set("Content-Type", "application/x-ndjson") // an error answer before the first line sets its own
	err = s.rt.ExportSession(r.Context(), id, ex.Write)
	if err == nil {
		if err = ex.Close(); err == nil {
			err = bw.Flush()
		}
	}
	started := ex.Started()
	if err != nil && started {
		s.opts.Log.Warn().Err(err).Str("session", id.String()).Msg("export cut short")
		panic(http.ErrAbortHandler)
	}
	return err
}

// importSession reads an export and makes it a new session (no model is
// called). It is all or nothing: the session is listed only once every
// line is stored and the end line checked; an import that fails, is cut
// off or is stopped by a crash leaves no session.
//
// With an Idempotency-Key, a repeat of the import answers with the
// session the first made (the key is committed with the session row); a
// key first sent with another body is idempotency_key_reused.
func (s *Server) importSession(w http.ResponseWriter, r *http.Request) error {
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	if key == "" {
		out, err := s.importExport(r.Context(), r.Body, nil)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, out)
		return nil
	}
	// The body's hash is known once it is read: a repeat reads it all
	// and compares; a first import is hashed as it is read.
	// A tenant's import keys are its own.
	owner := persistence.TenantOwner(tenantOf(r.Context()))
	row, found, release, err := s.rt.ClaimKey(r.Context(), persistence.ScopeImport, owner, key, "")
	if err != nil {
		return err
	}
	defer release()
	sum := sha256.New()
	body := io.TeeReader(r.Body, sum)
	if found {
		if _, err := io.Copy(io.Discard, body); err != nil {
			return err
		}
		if hex.EncodeToString(sum.Sum(nil)) != row.Hash {
			return fmt.Errorf("%w: key %q was first sent with another request (made %s); use a new key",
				actors.ErrKeyReused, key, row.Created.UTC().Format(time.RFC3339))
		}
		return s.imported(w, r, row)
	}
	keyRow := &persistence.IdempotencyRow{Scope: persistence.ScopeImport, Owner: owner, Key: key}
	out, err := s.importExport(r.Context(), body, func() (*persistence.IdempotencyRow, error) {
		if _, err := io.Copy(io.Discard, body); err != nil { // anything after the end line is the body's too
			return nil, err
		}
		keyRow.Hash, keyRow.Created = hex.EncodeToString(sum.Sum(nil)), time.Now().UTC()
		return keyRow, nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// imported answers a repeat of an import with the session the first made.
func (s *Server) imported(w http.ResponseWriter, r *http.Request, row persistence.IdempotencyRow) error {
	sess, err := s.ownSession(r.Context(), row.Session)
	if err != nil {
		return err
	}
	b, err := s.rt.DB().BranchRow(r.Context(), row.Branch)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, api.Imported{Session: Session(sess), Branch: Branch(b), Turns: row.Count})
	return nil
}

// Import batches: the items of one branch committed together.
const (
	importBatchItems = 256
	importBatchBytes = 4 << 20
)

// importLineLimit is the longest line an import reads: a turn's two
// messages at store.max_payload_bytes each, and 64 KiB more.
func (s *Server) importLineLimit() int {
	return int(2*s.rt.DB().MaxPayloadBytes() + 64<<10)
}

// importExport imports the export body; key, if not nil, gives the
// idempotency key's row committed with the session (its session, branch
// and count filled in).
func (s *Server) importExport(ctx context.Context, body io.Reader, key func() (*persistence.IdempotencyRow, error)) (api.Imported, error) {
	var out api.Imported
	lr := &lineReader{br: bufio.NewReaderSize(body, 64<<10), limit: s.importLineLimit(), sum: sha256.New()}
	line, err := lr.next()
	if errors.Is(err, io.EOF) {
		return out, invalid("the export is empty")
	}
	if err != nil {
		return out, err
	}
	var head export.SessionLine
	if err := json.Unmarshal(line, &head); err != nil {
		return out, invalid("line 1: %s", jsonProblem(err, &head))
	}
	if head.Type != "session" {
		return out, invalid("line 1: type %q: want session", head.Type)
	}
	if len(head.Title) > MaxTitleBytes {
		return out, invalid("line 1: title: %d bytes, limit %d", len(head.Title), MaxTitleBytes)
	}
	title := head.Title
	if title == "" {
		title = "imported"
	}
	im := s.rt.BeginImportFor(tenantOf(ctx), title, head.Created)
	committed := false
	defer func() {
		if !committed {
			// What was stored is dropped, even if the client went away.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := im.Abort(actx); err != nil {
				s.opts.Log.Warn().Err(err).Msg("import: drop what a failed import stored")
			}
		}
	}()
	var active int
	switch head.Format {
	case 0:
		err = s.importV1(ctx, lr, im, &out)
	case export.Format:
		active, err = s.importV2(ctx, lr, im, &out)
	default:
		err = invalid("line 1: format %d: want %d (or none, format 1)", head.Format, export.Format)
	}
	if err != nil {
		return out, err
	}
	if key != nil {
		if im.Key, err = key(); err != nil {
			return out, err
		}
		im.Key.Count = out.Turns
	}
	sess, err := im.Commit(ctx, active)
	if err != nil {
		return out, err
	}
	committed = true
	out.Session, out.Branch, out.Branches = Session(sess), Branch(im.Branches()[active]), len(im.Branches())
	return out, nil
}

// batch is the items of a branch waiting to be added, with the lines
// they came from.
type batch struct {
	im          *actors.SessionImport
	items       []export.Item
	bytes       int
	first, last int
}

func (b *batch) add(ctx context.Context, it export.Item, line, size int) error {
	if len(b.items) == 0 {
		b.first = line
	}
	b.items, b.bytes, b.last = append(b.items, it), b.bytes+size, line
	if len(b.items) >= importBatchItems || b.bytes >= importBatchBytes {
		return b.flush(ctx)
	}
	return nil
}

func (b *batch) flush(ctx context.Context) error {
	if len(b.items) == 0 {
		return nil
	}
	err := b.im.Add(ctx, b.items)
	clear(b.items)
	b.items, b.bytes = b.items[:0], 0
	if err != nil {
		return fmt.Errorf("lines %d to %d: %w", b.first, b.last, err)
	}
	return nil
}

func (s *Server) importV2(ctx context.Context, lr *lineReader, im *actors.SessionImport, out *api.Imported) (int, error) {
	b := &batch{im: im}
	headDone := true
	for {
		line, err := lr.next()
		if errors.Is(err, io.EOF) {
			return 0, invalid("the export ends at line %d without its end line: it was cut short", lr.n)
		}
		if err != nil {
			return 0, err
		}
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		n := lr.n
		var kind struct{ Type string }
		if err := json.Unmarshal(line, &kind); err != nil {
			return 0, invalid("line %d: %s", n, jsonProblem(err, &kind))
		}
		strict := func(v any) error {
			d := json.NewDecoder(strings.NewReader(string(line)))
			d.DisallowUnknownFields()
			if err := d.Decode(v); err != nil {
				return invalid("line %d: %s: %s", n, kind.Type, jsonProblem(err, v))
			}
			return nil
		}
		if kind.Type != "branch" && kind.Type != "end" && headDone {
			return 0, invalid("line %d: type %s: want a branch line first", n, kind.Type)
		}
		switch kind.Type {
		case "branch":
			var l export.BranchLine
			if err := strict(&l); err != nil {
				return 0, err
			}
			if !headDone {
				return 0, invalid("line %d: branch: the branch before it has no head line", n)
			}
			if len(l.Label) > MaxLabelBytes {
				return 0, invalid("line %d: label: %d bytes, limit %d", n, len(l.Label), MaxLabelBytes)
			}
			if err := s.checkPins(n, "base.pinned", l.Base.Pinned); err != nil {
				return 0, err
			}
			if _, err := im.AddBranch(ctx, export.Branch{Label: l.Label, Created: l.Created, Parent: l.Parent,
				ForkAtDepth: l.ForkAtDepth, TipDepth: l.TipDepth, ForkSeq: l.ForkSeq, Base: l.Base.State(),
				Carried: l.Carried}); err != nil {
				return 0, fmt.Errorf("line %d: %w", n, err)
			}
			headDone = false
		case "turn":
			var l export.TurnLine
			if err := strict(&l); err != nil {
				return 0, err
			}
			t := export.Turn{Seq: l.Seq}
			switch {
			case l.User == nil:
				return 0, invalid("line %d: user: required", n)
			case (l.Reply == nil) == (l.Failed == nil):
				return 0, invalid("line %d: a turn has a reply or failed, one of them", n)
			case l.Failed != nil && l.Failed.Reason == "":
				return 0, invalid("line %d: failed.reason: required", n)
			}
			t.User = *l.User
			if l.Failed != nil {
				t.Failed, t.Code, t.Reason = true, l.Failed.Code, l.Failed.Reason
			} else {
				t.Reply = *l.Reply
			}
			out.Turns++
			if err := b.add(ctx, export.Item{Turn: &t}, n, len(line)); err != nil {
				return 0, err
			}
		case "state":
			var l export.StateLine
			if err := strict(&l); err != nil {
				return 0, err
			}
			if err := s.checkPins(n, "pinned", l.Pinned); err != nil {
				return 0, err
			}
			st := l.State()
			out.States++
			if err := b.add(ctx, export.Item{State: &st}, n, len(line)); err != nil {
				return 0, err
			}
		case "head":
			var l export.HeadLine
			if err := strict(&l); err != nil {
				return 0, err
			}
			if err := s.checkPins(n, "pinned", l.Pinned); err != nil {
				return 0, err
			}
			if err := b.add(ctx, export.Item{Head: &export.Head{Pinned: l.Pinned, Model: l.Model}}, n, len(line)); err != nil {
				return 0, err
			}
			if err := b.flush(ctx); err != nil {
				return 0, err
			}
			headDone = true
		case "end":
			var l export.EndLine
			if err := strict(&l); err != nil {
				return 0, err
			}
			sum := hex.EncodeToString(lr.before)
			switch {
			case !headDone:
				return 0, invalid("line %d: end: the last branch has no head line", n)
			case l.SHA256 != sum:
				return 0, invalid("line %d: sha256: %q, the lines before it give %q: the export was changed or cut", n, l.SHA256, sum)
			case l.Branches != len(im.Branches()) || l.Turns != out.Turns || l.States != out.States:
				return 0, invalid("line %d: end: %d branches, %d turns and %d states, the export has %d, %d and %d",
					n, l.Branches, l.Turns, l.States, len(im.Branches()), out.Turns, out.States)
			case l.ActiveBranch < 0 || l.ActiveBranch >= len(im.Branches()):
				return 0, invalid("line %d: active_branch: %d, want 0 to %d", n, l.ActiveBranch, len(im.Branches())-1)
			}
			if _, err := lr.next(); !errors.Is(err, io.EOF) {
				if err == nil {
					err = invalid("line %d: a line after the end line", lr.n)
				}
				return 0, err
			}
			return l.ActiveBranch, nil
		default:
			return 0, invalid("line %d: type %q: want branch, turn, state, head or end", n, kind.Type)
		}
	}
}

// checkPins refuses a pinned fact over context.max_pin_bytes, as
// pinning does.
func (s *Server) checkPins(line int, field string, pins []string) error {
	limit := s.rt.PinLimits().MaxBytes
	for i, p := range pins {
		if len(p) > limit {
			return invalid("line %d: %s[%d]: %d bytes, limit %d (context.max_pin_bytes)", line, field, i, len(p), limit)
		}
	}
	return nil
}

// importV1Pending is how many of a format-1 import's newest turns are
// left pending, for the fold policy to fold with the librarian once the
// import is done. Format 1 has no states: the turns before them are
// folded as the import goes, importV1Pending at a time, with the
// deterministic summary (core.FallbackSummary: no model is called), so
// that the branch never holds more than twice as many pending turns and
// they are indexed as they are imported.
const importV1Pending = 256

// importV1 reads the messages of format 1 into the session's one
// branch: each user message and the assistant messages after it are a
// turn.
func (s *Server) importV1(ctx context.Context, lr *lineReader, im *actors.SessionImport, out *api.Imported) error {
	if _, err := im.AddBranch(ctx, export.Branch{Label: "main", Parent: -1}); err != nil {
		return err
	}
	b := &batch{im: im}
	var cur *export.Turn
	var pending []*export.Turn // not folded yet
	summary := ""
	put := func() error {
		if cur == nil {
			return nil
		}
		out.Turns++
		t := cur
		cur = nil
		if err := b.add(ctx, export.Item{Turn: t}, lr.n, len(t.User.RenderedText)+len(t.Reply.RenderedText)); err != nil {
			return err
		}
		if pending = append(pending, t); len(pending) < 2*importV1Pending {
			return nil
		}
		fold := pending[:importV1Pending]
		st := export.State{Seq: uint64(out.States + 1)}
		exchanges := make([]core.Exchange, len(fold))
		for i, t := range fold {
			exchanges[i] = core.Exchange{User: t.User.RenderedText, Assistant: t.Reply.RenderedText}
			st.Turns = append(st.Turns, t.Seq)
		}
		summary = core.FallbackSummary(summary, exchanges)
		st.Summary = summary
		pending = append(pending[:0], pending[importV1Pending:]...)
		out.States++
		return b.add(ctx, export.Item{State: &st}, lr.n, len(summary))
	}
	for {
		line, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var l export.V1Line
		if err := json.Unmarshal(line, &l); err != nil {
			return invalid("line %d: %s", lr.n, jsonProblem(err, &l))
		}
		switch {
		case l.Type == "message" && l.Message != nil && l.Message.Role == messages.RoleUser:
			if err := put(); err != nil {
				return err
			}
			cur = &export.Turn{Seq: uint64(out.Turns + 1), User: *l.Message, Reply: messages.NewMessage(messages.RoleAssistant)}
		case l.Type == "message" && l.Message != nil && l.Message.Role == messages.RoleAssistant:
			if cur == nil {
				return invalid("line %d: an assistant message before any user message", lr.n)
			}
			cur.Reply.Blocks = append(cur.Reply.Blocks, l.Message.Blocks...)
			cur.Reply.RenderedText += l.Message.RenderedText
		default:
			return invalid("line %d: type %q: want message (with a user or assistant message)", lr.n, l.Type)
		}
	}
	if err := put(); err != nil {
		return err
	}
	if out.Turns == 0 {
		return invalid("no user message to import")
	}
	if err := b.add(ctx, export.Item{Head: &export.Head{}}, lr.n, 0); err != nil {
		return err
	}
	return b.flush(ctx)
}

// lineReader reads lines of at most limit bytes, holding one at a time,
// and hashes them: before is the hash of the lines before the last one
// read.
type lineReader struct {
	br     *bufio.Reader
	limit  int
	buf    []byte
	n      int // lines read
	sum    hash.Hash
	before []byte
}

func (lr *lineReader) next() ([]byte, error) {
	lr.before = lr.sum.Sum(lr.before[:0])
	lr.buf = lr.buf[:0]
	for {
		chunk, err := lr.br.ReadSlice('\n')
		if len(lr.buf)+len(chunk) > lr.limit {
			return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge, Message: fmt.Sprintf(
				"line %d: over the limit of %d bytes for a line (two messages of store.max_payload_bytes, and 64 KiB)", lr.n+1, lr.limit)}
		}
		lr.buf = append(lr.buf, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(lr.buf) > 0:
		case err != nil:
			return nil, err
		}
		lr.n++
		lr.sum.Write(lr.buf)
		return lr.buf, nil
	}
}
