package api

// The bodies of the runtime API's requests. Each route refuses fields it
// does not know.

// CreateSessionRequest is the body of POST /v1/sessions (optional).
type CreateSessionRequest struct {
	Title string `json:"title"`
}

// ForkRequest is the body of POST /v1/branches/{id}/forks (optional): the
// fork continues after turn At (a turn id; "" for the head).
type ForkRequest struct {
	At    string `json:"at,omitempty"`
	Label string `json:"label"`
}

// TurnRequest is the body of POST /v1/branches/{id}/turns: the user's
// message, and whether to stream the turn as server-sent events (as
// Accept: text/event-stream does).
type TurnRequest struct {
	Text   string `json:"text"`
	Stream bool   `json:"stream,omitempty"`
}

// ExchangeRequest is the body of POST /v1/branches/{id}/exchanges: an
// exchange that happened elsewhere, the user's message and the reply
// its model gave (which may be empty), to record as a finished turn.
type ExchangeRequest struct {
	User  string `json:"user"`
	Reply string `json:"reply"`
}

// PinRequest is the body of POST /v1/branches/{id}/pins and of PUT
// /v1/branches/{id}/pins/{pin}.
type PinRequest struct {
	Fact string `json:"fact"`
}

// SelectModelRequest is the body of PUT /v1/branches/{id}/model: the
// model's name in the server's config.
type SelectModelRequest struct {
	Model string `json:"model"`
}

// SelectMemoryToolsRequest is the body of PUT
// /v1/branches/{id}/memory_tools: "on" or "off" (the branch's next turns
// are offered the memory tools or not, whatever the server's config
// says), or "default" (as its config says for the branch's model).
type SelectMemoryToolsRequest struct {
	MemoryTools string `json:"memory_tools"`
}

// RetentionRequest is the body of PUT /v1/sessions/{id}/retention: the
// session's own retention ("30d", "36h", "0": kept forever); null
// returns it to its tenant's.
type RetentionRequest struct {
	Idle *string `json:"idle"`
}

// Reindexed is the answer to POST /v1/branches/{id}/reindex: the chunks
// inserted and those already indexed.
type Reindexed struct {
	Inserted int `json:"inserted"`
	Skipped  int `json:"skipped"`
}
