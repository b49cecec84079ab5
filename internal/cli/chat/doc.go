// Package chat is `ctxinf chat` and `ctxinf tui`: the line mode and the
// terminal UI (internal/tui), both over one tui.Backend: the embedded
// runtime (embedded) or the API of the server that owns the data
// directory (remote).
package chat
