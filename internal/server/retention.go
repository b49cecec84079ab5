package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/messages"
)

// getRetention answers a session's retention and last activity.
func (s *Server) getRetention(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID[messages.SessionID](r, "session")
	if err != nil {
		return err
	}
	if _, err := s.ownSession(r.Context(), id); err != nil {
		return err // another tenant's is not found
	}
	in, err := s.rt.Retention(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, retentionOut(in))
	return nil
}

// putRetention sets a session's own retention: {"idle": "30d"}, "0"
// keeps it forever, null returns it to its tenant's.
func (s *Server) putRetention(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID[messages.SessionID](r, "session")
	if err != nil {
		return err
	}
	var in struct {
		Idle json.RawMessage `json:"idle"`
	}
	if err := decode(r, &in); err != nil {
		return err
	}
	const want = `want whole days ("30d"), a Go duration ("36h") or "0" (kept forever), other than 0 from 1s to 36500d; or null for the tenant's`
	if in.Idle == nil {
		return invalid("idle: required: %s", want)
	}
	var idle *time.Duration
	if string(in.Idle) != "null" {
		var v string
		if err := json.Unmarshal(in.Idle, &v); err != nil {
			return invalid("idle: %s is not a string: %s", in.Idle, want)
		}
		d, err := actors.ParseRetention(v)
		if err != nil {
			return invalid("idle: %q: %s", v, want)
		}
		idle = &d
	}
	if _, err := s.ownSession(r.Context(), id); err != nil {
		return err
	}
	out, err := s.rt.SetRetention(r.Context(), id, idle)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, retentionOut(out))
	return nil
}
