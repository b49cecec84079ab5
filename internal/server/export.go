package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/export"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// The export format, its lines, its writer and its reader are package
// export's; this file serves exports and stores what an import reads.

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
	xr := export.NewReader(body, export.ReadOptions{MaxLineBytes: s.importLineLimit(), MaxTitleBytes: MaxTitleBytes,
		MaxLabelBytes: MaxLabelBytes, MaxPinBytes: s.rt.PinLimits().MaxBytes, JSONProblem: jsonProblem})
	head, err := xr.Session()
	if err != nil {
		return out, importError(err)
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
	if err := importItems(ctx, xr, head.Format == 0, im, &out); err != nil {
		return out, err
	}
	if key != nil {
		if im.Key, err = key(); err != nil {
			return out, err
		}
		im.Key.Count = out.Turns
	}
	active := xr.ActiveBranch()
	sess, err := im.Commit(ctx, active)
	if err != nil {
		return out, err
	}
	committed = true
	out.Session, out.Branch, out.Branches = Session(sess), Branch(im.Branches()[active]), len(im.Branches())
	return out, nil
}

// importError is an error of reading an export in the API's terms.
func importError(err error) error {
	var bad *export.InvalidError
	var long *export.LineTooLongError
	switch {
	case errors.As(err, &bad):
		return invalid("%s", bad.Message)
	case errors.As(err, &long):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge, Message: fmt.Sprintf(
			"line %d: over the limit of %d bytes for a line (two messages of store.max_payload_bytes, and 64 KiB)", long.Line, long.Limit)}
	}
	return err
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

// importItems adds the items xr reads to im, a branch at a time, in
// batches; a branch's head ends its last batch. A format-1 export (v1)
// has no states: its turns are folded as they come (v1Folder).
func importItems(ctx context.Context, xr *export.Reader, v1 bool, im *actors.SessionImport, out *api.Imported) error {
	b := &batch{im: im}
	fold := &v1Folder{}
	for {
		it, err := xr.Next()
		if errors.Is(err, io.EOF) {
			return b.flush(ctx)
		}
		if err != nil {
			return importError(err)
		}
		n, size := xr.Line(), xr.Size()
		switch {
		case it.Branch != nil:
			if _, err := im.AddBranch(ctx, *it.Branch); err != nil {
				if v1 {
					return err
				}
				return fmt.Errorf("line %d: %w", n, err)
			}
		case it.Turn != nil:
			out.Turns++
			if err := b.add(ctx, it, n, size); err != nil {
				return err
			}
			if !v1 {
				continue
			}
			if st := fold.add(it.Turn, out.States); st != nil {
				out.States++
				if err := b.add(ctx, export.Item{State: st}, n, len(st.Summary)); err != nil {
					return err
				}
			}
		case it.State != nil:
			out.States++
			if err := b.add(ctx, it, n, size); err != nil {
				return err
			}
		case it.Head != nil:
			if err := b.add(ctx, it, n, size); err != nil {
				return err
			}
			if err := b.flush(ctx); err != nil {
				return err
			}
		}
	}
}

// importV1Pending is how many of a format-1 import's newest turns are
// left pending, for the fold policy to fold with the librarian once the
// import is done. Format 1 has no states: the turns before them are
// folded as the import goes, importV1Pending at a time, with the
// deterministic summary (core.FallbackSummary: no model is called), so
// that the branch never holds more than twice as many pending turns and
// they are indexed as they are imported.
const importV1Pending = 256

// v1Folder folds the turns of a format-1 import as they come.
type v1Folder struct {
	pending []*export.Turn // not folded yet
	summary string
}

// add takes turn t; once 2*importV1Pending are pending, it returns the
// state folding the oldest importV1Pending, the states+1st of the
// import.
func (f *v1Folder) add(t *export.Turn, states int) *export.State {
	if f.pending = append(f.pending, t); len(f.pending) < 2*importV1Pending {
		return nil
	}
	fold := f.pending[:importV1Pending]
	st := export.State{Seq: uint64(states + 1)}
	exchanges := make([]core.Exchange, len(fold))
	for i, t := range fold {
		exchanges[i] = core.Exchange{User: t.User.RenderedText, Assistant: t.Reply.RenderedText}
		st.Turns = append(st.Turns, t.Seq)
	}
	f.summary = core.FallbackSummary(f.summary, exchanges)
	st.Summary = f.summary
	f.pending = append(f.pending[:0], f.pending[importV1Pending:]...)
	return &st
}
