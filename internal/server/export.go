package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/messages"
)

// exportLine is one line of a session export (JSON lines): first the
// session ({"type":"session"}), then every message of its active
// branch's transcript, oldest first ({"type":"message"}). Forks are not
// exported.
type exportLine struct {
	Type    string             `json:"type"`
	Title   string             `json:"title,omitempty"`
	Session messages.SessionID `json:"session,omitzero"`
	Branch  messages.BranchID  `json:"branch,omitzero"`
	Message *messages.Message  `json:"message,omitempty"`
}

// MaxImportLines bounds an imported session.
const MaxImportLines = 200_000

func (s *Server) exportSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID[messages.SessionID](r, "session")
	if err != nil {
		return err
	}
	sess, err := s.rt.DB().Session(r.Context(), id)
	if err != nil {
		return err
	}
	// Streamed a page at a time, oldest first: an export of any length
	// holds one page in memory. Until the first line goes out a failure
	// is an error reply; after it, the connection is cut, so that the
	// client sees a broken stream rather than an export that looks whole.
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	started := false
	start := func() error {
		if started {
			return nil
		}
		started = true
		w.Header().Set("Content-Type", "application/x-ndjson")
		return enc.Encode(exportLine{Type: "session", Title: sess.Title, Session: sess.ID, Branch: sess.ActiveBranch})
	}
	err = s.rt.EachMessage(r.Context(), sess.ActiveBranch, MaxHistory, func(e actors.Entry) error {
		if err := start(); err != nil {
			return err
		}
		return enc.Encode(exportLine{Type: "message", Message: &e.Message})
	})
	if err == nil {
		if err = start(); err == nil {
			err = bw.Flush()
		}
	}
	if err != nil && started {
		s.opts.Log.Warn().Err(err).Str("session", id.String()).Msg("export cut short")
		panic(http.ErrAbortHandler)
	}
	return err
}

// importSession reads an export and makes it a new session: each user
// message and the assistant messages after it become one imported turn
// (no model is called); they are folded and indexed like any other.
func (s *Server) importSession(w http.ResponseWriter, r *http.Request) error {
	sc := bufio.NewScanner(r.Body)
	sc.Buffer(make([]byte, 64<<10), int(s.opts.MaxBodyBytes))
	title := "imported"
	var xs []actors.Exchange
	n := 0
	for sc.Scan() {
		n++
		if n > MaxImportLines {
			return invalid("line %d: an import holds at most %d lines", n, MaxImportLines)
		}
		if len(sc.Bytes()) == 0 {
			continue
		}
		var l exportLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return invalid("line %d: %s", n, jsonProblem(err, &l))
		}
		switch {
		case l.Type == "session":
			if l.Title != "" {
				title = l.Title
			}
		case l.Type == "message" && l.Message != nil && l.Message.Role == messages.RoleUser:
			xs = append(xs, actors.Exchange{User: *l.Message, Reply: messages.NewMessage(messages.RoleAssistant)})
		case l.Type == "message" && l.Message != nil && l.Message.Role == messages.RoleAssistant:
			if len(xs) == 0 {
				return invalid("line %d: an assistant message before any user message", n)
			}
			last := &xs[len(xs)-1]
			last.Reply.Blocks = append(last.Reply.Blocks, l.Message.Blocks...)
			last.Reply.RenderedText += l.Message.RenderedText
		default:
			return invalid("line %d: type %q: want session or message (with a user or assistant message)", n, l.Type)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(xs) == 0 {
		return invalid("no user message to import")
	}
	sess, b, err := s.rt.CreateSession(r.Context(), title)
	if err != nil {
		return err
	}
	for i := 0; i < len(xs); i += actors.MaxImport {
		if _, err := s.rt.Import(r.Context(), b.ID, xs[i:min(i+actors.MaxImport, len(xs))]); err != nil {
			return fmt.Errorf("import into session %s: %w", sess.ID, err)
		}
	}
	writeJSON(w, http.StatusCreated, client.Imported{Session: sess, Branch: b, Turns: len(xs)})
	return nil
}
