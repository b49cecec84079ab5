package server

import (
	"net/http"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
)

// deleteSession deletes a session and all its branches for good (SRD
// §14.4): when it answers, no file of the data dir holds their content.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID[messages.SessionID](r, "session")
	if err != nil {
		return err
	}
	if _, err := s.ownSession(r.Context(), id); err != nil {
		return err // another tenant's is not found
	}
	res, err := s.rt.DeleteSession(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, Deleted(res))
	return nil
}

// deleteBranch deletes a branch without forks, not its session's first,
// for good.
func (s *Server) deleteBranch(w http.ResponseWriter, r *http.Request) error {
	id, _, err := s.branch(r)
	if err != nil {
		return err
	}
	res, err := s.rt.DeleteBranch(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, Deleted(res))
	return nil
}

// Deleted is what a delete did, as the API answers it (and the CLI and
// chat print it).
func Deleted(res actors.DeleteResult) api.Deleted {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return api.Deleted{Session: res.Session, Branches: res.Branches, Nodes: res.Nodes, Turns: res.Turns,
		Blobs: res.Blobs, Chunks: res.Chunks, Steps: len(res.Steps), Journals: res.Journals, Keys: res.Keys,
		ValueLogPending: res.ValueLogPending, TookMS: ms(res.Took), ScrubMS: ms(res.Scrub)}
}
