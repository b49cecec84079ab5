// Package export is the format of a session's export (GET
// /v1/sessions/{id}/export, POST /v1/sessions/import, `ctxinf` through a
// server): JSON lines, one per item of the session, in the order the
// items happened, closed by an end line with the counts and a SHA-256
// of the lines before it. Items are what the runtime reads from a
// session and what an import stores (Item); Writer writes them as an
// export, Reader reads an export (either format) back into them,
// checking it as it goes, and the Line types are each line's JSON.
//
// It imports messages only: a program reads or writes exports without
// the server, the runtime or the store.
package export
