// Package chat is `ctxinf chat` and `ctxinf tui`: the line mode and the
// terminal UI (internal/tui), each over the embedded runtime or the
// server that owns the data directory (chatRuntime, and the TUI's
// backends).
package chat
