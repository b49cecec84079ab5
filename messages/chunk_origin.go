package messages

import "time"

// ChunkSaid is when a chunk's text was said: at, the time its message
// says (an imported conversation's), or else the time of the id of its
// transcript node (the user message's acceptance, the reply's end), or
// of its source turn for a chunk without a node.
func ChunkSaid(at time.Time, node NodeID, turn TurnID) time.Time {
	switch {
	case !at.IsZero():
		return at
	case !node.IsZero():
		return node.Time()
	}
	return turn.Time()
}

// ChunkRole is who said a chunk's text by role: "tool" for a tool's
// result, "user" for the text of its turn's user message (node zero or
// the turn itself), else "assistant".
func ChunkRole(t ChunkType, node NodeID, turn TurnID) string {
	switch {
	case t == ChunkToolResult:
		return "tool"
	case node.IsZero() || node == turn:
		return "user"
	}
	return "assistant"
}
