package server

import (
	"net/http"

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
