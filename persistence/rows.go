package persistence

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// The rows of the lifecycle tables (SRD §16), and Tx, the one way they
// are written. Every engine stores these same rows; how it lays them out
// is its own (Badger: package badgerdb; PostgreSQL: package pgdb).

// ErrRowNotFound is returned when a lifecycle row does not exist.
var ErrRowNotFound = fmt.Errorf("%w: row", ErrNotFound)

// maxActorNameLen is the longest actor name, in bytes.
const maxActorNameLen = 256

// SessionRow is a conversation container (SRD §5.4).
type SessionRow struct {
	ID           messages.SessionID `json:"id"`
	Title        string             `json:"title,omitempty"`
	ActiveBranch messages.BranchID  `json:"active_branch"`
	Created      time.Time          `json:"created"`
	// Tenant owns the session (the tenant of the token that created
	// it); "" in the rows written before tenants: DefaultTenant's.
	// It never changes.
	Tenant string `json:"tenant,omitempty"`
	// Retention, when set, is how long the session may stay idle before
	// the retention job deletes it, overriding its tenant's and the
	// runtime's (0: kept forever); nil: theirs apply. See retention.go.
	Retention *time.Duration `json:"retention_ns,omitempty"`
	// Metadata labels the session, set when it is made: a proxied
	// conversation's end user, client (its User-Agent) and source
	// ("proxy"). Rows written before it have none. It never changes.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// SessionQuery selects a page of a tenant's sessions (Database.SessionPage):
// up to Limit (0 to MaxPageNodes) of Tenant's sessions whose ids follow
// After (zero: from the first), in the order of their ids, or the reverse
// with Newest. A row naming no tenant is DefaultTenant's; Tenant "" means
// DefaultTenant.
type SessionQuery struct {
	Tenant string
	After  messages.SessionID
	Limit  int
	Newest bool
}

// TenantName is the tenant q names: its Tenant, DefaultTenant if none.
func (q SessionQuery) TenantName() string {
	if q.Tenant == "" {
		return DefaultTenant
	}
	return q.Tenant
}

// DefaultTenant is the tenant of a session whose row names none (made
// before tenants, or by the library and the local CLI) and of the
// server's own tokens (server.tokens_env).
const DefaultTenant = "default"

// MaxTenantName is the longest tenant name, in bytes.
const MaxTenantName = 64

// TenantName is the tenant that owns s: its Tenant, DefaultTenant if none.
func (s SessionRow) TenantName() string {
	if s.Tenant == "" {
		return DefaultTenant
	}
	return s.Tenant
}

// ImportRow marks a session being imported: its rows are written in
// batches, and its session row (what lists it) only by the commit that
// ends the import, which deletes this row. A row left at Open is an
// import a crash cut short: its branches are dropped (Tx.DropBranches).
type ImportRow struct {
	Session messages.SessionID `json:"session"`
	Started time.Time          `json:"started"`
}

// BranchRow describes a branch of a session (SRD §5.4); its live state is
// its actor's.
type BranchRow struct {
	ID      messages.BranchID  `json:"id"`
	Session messages.SessionID `json:"session"`
	Parent  messages.BranchID  `json:"parent,omitempty"`
	ForkAt  messages.NodeID    `json:"fork_at,omitempty"`
	// ForkSeq is the parent's turn_seq at the fork point: the fork sees
	// the parent's turns up to it.
	ForkSeq uint64    `json:"fork_seq,omitempty"`
	Label   string    `json:"label,omitempty"`
	Created time.Time `json:"created"`
}

// TurnRow is a user turn's lifecycle record (SRD §5.6); (Branch, Seq) is
// unique and always names the same turn.
type TurnRow struct {
	Branch     messages.BranchID  `json:"branch"`
	Seq        uint64             `json:"seq"`
	ID         messages.TurnID    `json:"id"` // also the transcript node of the user message
	Phase      messages.TurnPhase `json:"phase"`
	Step       messages.StepID    `json:"step,omitempty"`
	Reply      messages.NodeID    `json:"reply,omitempty"`   // transcript node of the assistant message
	Outcome    string             `json:"outcome,omitempty"` // a messages.OutcomeKind, once the response is final or the turn failed
	Code       string             `json:"code,omitempty"`    // why a failed turn failed: one of messages' Fail* codes
	Reason     string             `json:"reason,omitempty"`
	StateAfter messages.StateID   `json:"state_after,omitempty"`
	StateSeq   uint64             `json:"state_seq,omitempty"`
	// SummarizeMicros is how long the summarizer's call that folded the
	// turn took, IndexMicros the chunking and embedding that indexed it
	// (SRD §15.1); 0 before (or a turn folded or indexed by a runtime
	// that did not record them).
	SummarizeMicros int64     `json:"summarize_us,omitempty"`
	IndexMicros     int64     `json:"index_us,omitempty"`
	Updated         time.Time `json:"updated"`
}

// StateRow is a committed state checkpoint (SRD §5.5); (Branch, Seq) is
// unique: a state transition is never committed twice.
type StateRow struct {
	Branch  messages.BranchID `json:"branch"`
	Seq     uint64            `json:"seq"`
	ID      messages.StateID  `json:"id"`
	Summary string            `json:"summary"`
	Pinned  []string          `json:"pinned,omitempty"`
	Turns   []messages.TurnID `json:"turns,omitempty"` // folded by this commit, in order
	Created time.Time         `json:"created"`
}

// JobType names durable background work (SRD §6.4).
type JobType string

// The job types. A turn has at most one job of each type.
const (
	// JobRespond: the turn was accepted and has no final response yet; if
	// the runtime stops, recovery marks it failed (SRD §6.5, rule 1).
	JobRespond JobType = "respond_turn"
	// JobSummarize: the turn is finalized and waits to be folded into a
	// committed state (SRD §6.4).
	JobSummarize JobType = "summarize_turn"
	// JobIndex: the turn is committed and waits to be indexed.
	JobIndex JobType = "index_turn"
)

var jobTypeCodes = map[JobType]byte{JobRespond: 'r', JobSummarize: 's', JobIndex: 'i'}

// Job is a durable unit of work on a turn: it exists as a row before it
// is a message, so that the startup reconciler finds it after a crash.
type Job struct {
	Type     JobType           `json:"type"`
	Branch   messages.BranchID `json:"branch"`
	Turn     messages.TurnID   `json:"turn"`
	Attempts int               `json:"attempts,omitempty"`
	Created  time.Time         `json:"created"`
}

// JobKey names a job: its type and its turn.
type JobKey struct {
	Type JobType
	Turn messages.TurnID
}

// ChunkRow is a retrieval unit of a committed turn (SRD §5.8, §9.3):
// unique by (SourceTurn, Type, Hash), so indexing twice inserts nothing.
// Its ID is derived from those three (retrieval.ChunkIDFor), so a turn
// indexed again, on the same or another branch, names the same chunk.
type ChunkRow struct {
	ID         messages.ChunkID   `json:"id"`
	Session    messages.SessionID `json:"session"`
	Branch     messages.BranchID  `json:"branch"` // the branch that indexed it first
	SourceTurn messages.TurnID    `json:"source_turn"`
	// Seq is the source turn's turn_seq; Node the transcript node (the
	// user message or the reply) the text is from, and Start and End its
	// byte offsets in that message's rendered text (0 and 0 for a tool's
	// result, which the rendered text does not hold).
	Seq      uint64             `json:"seq"`
	Node     messages.NodeID    `json:"node,omitzero"`
	Start    int                `json:"start"`
	End      int                `json:"end"`
	Type     messages.ChunkType `json:"type"`
	Text     string             `json:"text"`
	Summary  string             `json:"summary"`
	TokenEst int                `json:"token_est"`
	Hash     Hash               `json:"hash"`
	Created  time.Time          `json:"created"`
	// Speaker is the participant who said the text and Time when, when
	// its message says (messages.Message's Speaker and Time: an
	// imported conversation's); otherwise its role (Role) and its
	// transcript node's time (Said) stand for them.
	Speaker string    `json:"speaker,omitempty"`
	Time    time.Time `json:"time,omitzero"`
	// Terms are the full-text index terms of the chunk with their
	// weights (its text's counts, plus its neighbour turns' at lower
	// weights) and TermCount their sum; they are stored in the branch's
	// partition row (BranchChunks), not in the chunk row.
	Terms     map[string]float32 `json:"-"`
	TermCount float32            `json:"-"`
}

// Said is when c's text was said (messages.ChunkSaid): Time, or the
// time of its transcript node's id.
func (c ChunkRow) Said() time.Time { return messages.ChunkSaid(c.Time, c.Node, c.SourceTurn) }

// Role is who said c's text by role (messages.ChunkRole): "tool",
// "user" or "assistant".
func (c ChunkRow) Role() string { return messages.ChunkRole(c.Type, c.Node, c.SourceTurn) }

// StepRow is a provider step of a turn (SRD §5.7): what was sent, what
// came back, normalized, and how it ended. (Turn, Index) is unique; a
// step's row is written once, when the step has ended.
type StepRow struct {
	ID       messages.StepID      `json:"id"`
	Branch   messages.BranchID    `json:"branch"`
	Turn     messages.TurnID      `json:"turn"`
	Index    uint32               `json:"index"`
	Provider string               `json:"provider"`
	Model    string               `json:"model"`
	Request  json.RawMessage      `json:"request,omitempty"`  // the raw request JSON as sent
	Response json.RawMessage      `json:"response,omitempty"` // the raw response JSON
	Items    messages.Items       `json:"items,omitempty"`    // the normalized transcript items
	Outcome  messages.StepOutcome `json:"outcome"`
	// StreamPath names the step's stream journal as SRD §13.1 does,
	// relative to the data dir: streams/{step_id}.jsonl (its bytes are
	// in the runtime's journal store; ctxinf inspect --journal writes
	// them out).
	StreamPath string `json:"stream_path,omitempty"`
	Displayed  uint64 `json:"displayed"`
	Durable    uint64 `json:"durable"`
	// InputTokens and OutputTokens are the usage the provider reported
	// (0 when it reported none), to compare with the estimate the
	// context was assembled with (Context.Estimated).
	InputTokens  int `json:"input_tokens,omitempty"`
	OutputTokens int `json:"output_tokens,omitempty"`
	// CacheReadTokens and CacheWriteTokens are the part of InputTokens
	// the provider reported read from and written to its prompt cache
	// (providers.Usage); 0 in rows written before they were kept.
	CacheReadTokens  int       `json:"cache_read_input_tokens,omitempty"`
	CacheWriteTokens int       `json:"cache_creation_input_tokens,omitempty"`
	Started          time.Time `json:"started"`
	Ended            time.Time `json:"ended"`
	// Interrupted marks the row recovery writes for a step a crash cut
	// off (SRD §6.5): its Outcome is incomplete, Partial the text its
	// stream journal recovered (SRD §13.4), shown labeled incomplete
	// and never part of the transcript. Displayed is then the journal's
	// bytes on disk (at least those were shown), Durable those of its
	// complete lines.
	Interrupted bool   `json:"interrupted,omitempty"`
	Partial     string `json:"partial,omitempty"`
	// Context says what the step's context was assembled from, so that
	// it can be rebuilt from the transcript and the state rows (ctxinf
	// context debug); set on a turn's first step.
	Context *ContextRecipe `json:"context,omitempty"`
}

// ContextLatency is where the assembly of a step's context spent its
// time (SRD §15.1), in microseconds: embedding the retrieval query, the
// hybrid search, and the whole assembly (which holds both).
type ContextLatency struct {
	EmbedMicros    int64 `json:"embed_us,omitempty"`
	SearchMicros   int64 `json:"search_us,omitempty"`
	AssembleMicros int64 `json:"assemble_us,omitempty"`
}

// ContextRecipe is what a context was assembled from: the head state
// (its summary is in a StateRow), the pinned facts at the time, the
// transcript nodes of the verbatim window, the pending turns, the user
// message, the budget and fold policy; and Hash, the SHA-256 of the
// assembled context's JSON, to check a rebuild against.
type ContextRecipe struct {
	State   messages.StateID  `json:"state"`
	Pinned  []string          `json:"pinned,omitempty"`
	Window  []messages.TurnID `json:"window,omitempty"`
	Pending []messages.TurnID `json:"pending,omitempty"` // turns, oldest first
	User    messages.TurnID   `json:"user"`
	// System is the turn's own system prompt (an API client's, sent with
	// the turn), put before the runtime's instructions; "" for none.
	System          string `json:"system,omitempty"`
	ContextLimit    int    `json:"context_limit"`
	ResponseReserve int    `json:"response_reserve"`
	SafetyMargin    int    `json:"safety_margin"`
	RetrievalMax    int    `json:"retrieval_max"`
	ChunkMax        int    `json:"chunk_max"`
	Estimated       int    `json:"estimated_tokens"` // the assembler's count of the context
	// RetrievalTokens is how much of RetrievalMax the retrieved memory
	// used, as the assembler counted it.
	RetrievalTokens int `json:"retrieval_tokens,omitempty"`
	// Latency is where the assembly spent its time; nil in recipes
	// written before it was recorded.
	Latency *ContextLatency `json:"latency,omitempty"`
	Hash    string          `json:"hash"`
	// Retrieved are the chunks retrieval offered the assembler, with
	// their scores; RetrievalError why retrieval failed, if it did (the
	// turn then went on without it).
	Retrieved      []RetrievedRef `json:"retrieved,omitempty"`
	RetrievalError string         `json:"retrieval_error,omitempty"`
	// Tools, ToolMode and ToolChoice are the tools the step offered the
	// model (the runtime's, then an API client's), the tool mode and the
	// tool choice, as sent; Params the client's generation settings.
	// They are what the model was given beside the assembled context
	// (the hash covers the context only). A recipe written before they
	// were recorded has none.
	Tools      []messages.Tool     `json:"tools,omitempty"`
	ToolMode   messages.ToolMode   `json:"tool_mode,omitempty"`
	ToolChoice messages.ToolChoice `json:"tool_choice,omitzero"`
	Params     messages.GenParams  `json:"params,omitzero"`
}

// RetrievedRef is a chunk offered to a context and its score.
type RetrievedRef struct {
	Chunk messages.ChunkID `json:"chunk"`
	Score float64          `json:"score"`
	// Forced: chosen by the user for this turn (Runtime.ForceChunks).
	Forced bool `json:"forced,omitempty"`
	// Excerpt, when the chunk came with its neighbours, is every chunk
	// of the excerpt offered (Chunk among them), in the conversation's
	// order: their texts, a line apart, were the retrieved memory.
	Excerpt []messages.ChunkID `json:"excerpt,omitempty"`
}

// Tx is a set of writes committed atomically and in order: either all of
// them become durable, or none. Parts that break a rule fail the whole Tx
// with an error naming the part and nothing is written.
type Tx struct {
	NewBranches []BranchSpec  // context-store branches to create
	Appends     []TxAppend    // context-store appends
	Sessions    []SessionRow  // upserted
	Branches    []BranchRow   // upserted
	NewTurns    []TurnRow     // inserted; a (branch, seq) taken by another turn is ErrDuplicate
	Turns       []TurnRow     // updated: rows their branch's single writer inserted
	States      []StateRow    // inserted; an existing (branch, seq) is ErrDuplicate
	Jobs        []Job         // upserted
	DoneJobs    []JobKey      // deleted (absent ones are ignored)
	Chunks      []ChunkRow    // inserted unless (source_turn, type, hash) exists; added to their Branch's partition either way
	Vectors     []VectorRow   // upserted
	TermUpdates []TermUpdate  // added to partition rows that exist (others are ignored)
	Steps       []StepRow     // inserted; a (turn, index) taken by another step is ErrDuplicate
	Events      []EventRecord // actor events, each appended at its index
	// Keys are idempotency keys, inserted with what they name (the same
	// row again writes nothing; a key stored for another request or
	// result is ErrDuplicate).
	Keys []IdempotencyRow
	// Proxy are entries of the proxy's conversation index, each
	// inserted unless its name has one (the first stays).
	Proxy    []ProxyEntry
	Snapshot *EventRecord // an actor snapshot, replacing its latest; no event is deleted for it
	// PrevSnapshot, with Snapshot, is the actor's snapshot until now,
	// read back and found readable: it is kept as the fallback of
	// Snapshot (replaced), and the events before its index are
	// deleted. Without it the fallback and every event stay, so that
	// an unreadable snapshot never costs the events it covers.
	PrevSnapshot *EventRecord
	// Imports are upserted, DoneImports deleted (absent ones are
	// ignored): see ImportRow.
	Imports     []ImportRow
	DoneImports []messages.SessionID
	// DropBranches deletes branches' rows and their sessions' index
	// entries (what an import cut short left): their transcript nodes,
	// turn and state rows and event logs stay, unreachable.
	DropBranches []BranchRow
	// Touched records activity on sessions that leaves no turn or branch
	// row (a pin): each session's last activity becomes the later of
	// its own and At (see DB.SessionActivity).
	Touched []SessionTouch
	// Retention sets sessions' own retention (SessionRow.Retention);
	// a session that does not exist is ErrRowNotFound.
	Retention []SessionRetention
	// RetentionJob, if set, replaces the retention job's record.
	RetentionJob *RetentionJob
}

// Check refuses a Tx that no engine commits, naming the part: a nil Tx,
// an actor name out of bounds, a previous snapshot without its
// snapshot, malformed idempotency keys or proxy entries, and appends that
// CheckAppend refuses or that have no turn id. Engines call it before
// anything else, then check what only they limit.
func (t *Tx) Check(lim Limits) error {
	if t == nil {
		return fmt.Errorf("%w: tx is nil", ErrInvalidArgument)
	}
	for _, e := range t.Events {
		if err := CheckActor(e.Actor); err != nil {
			return err
		}
	}
	if e := t.Snapshot; e != nil {
		if err := CheckActor(e.Actor); err != nil {
			return err
		}
	}
	if p := t.PrevSnapshot; p != nil {
		if s := t.Snapshot; s == nil || s.Actor != p.Actor || s.Index < p.Index {
			return fmt.Errorf("%w: previous snapshot of %q at %d without a snapshot of it at or after that index",
				ErrInvalidArgument, p.Actor, p.Index)
		}
	}
	if err := checkKeys(t.Keys); err != nil {
		return err
	}
	if err := checkProxy(t.Proxy, lim); err != nil {
		return err
	}
	for i, a := range t.Appends {
		if err := CheckAppend(a.Branch, a.Req, lim); err != nil {
			return fmt.Errorf("append %d: %w", i, err)
		}
		if a.ID.IsZero() {
			return fmt.Errorf("%w: append %d: turn id is zero", ErrInvalidArgument, i)
		}
	}
	return nil
}

// merge appends src's writes to t's, to commit both as one transaction.
func (t *Tx) merge(src *Tx) {
	t.NewBranches = append(t.NewBranches, src.NewBranches...)
	t.Appends = append(t.Appends, src.Appends...)
	t.Sessions = append(t.Sessions, src.Sessions...)
	t.Branches = append(t.Branches, src.Branches...)
	t.NewTurns = append(t.NewTurns, src.NewTurns...)
	t.Turns = append(t.Turns, src.Turns...)
	t.States = append(t.States, src.States...)
	t.Jobs = append(t.Jobs, src.Jobs...)
	t.DoneJobs = append(t.DoneJobs, src.DoneJobs...)
	t.Chunks = append(t.Chunks, src.Chunks...)
	t.Vectors = append(t.Vectors, src.Vectors...)
	t.TermUpdates = append(t.TermUpdates, src.TermUpdates...)
	t.Steps = append(t.Steps, src.Steps...)
	t.Events = append(t.Events, src.Events...)
	t.Keys = append(t.Keys, src.Keys...)
	t.Proxy = append(t.Proxy, src.Proxy...)
	if src.Snapshot != nil {
		t.Snapshot, t.PrevSnapshot = src.Snapshot, src.PrevSnapshot
	}
	t.Imports = append(t.Imports, src.Imports...)
	t.DoneImports = append(t.DoneImports, src.DoneImports...)
	t.DropBranches = append(t.DropBranches, src.DropBranches...)
	t.Touched = append(t.Touched, src.Touched...)
	t.Retention = append(t.Retention, src.Retention...)
	if src.RetentionJob != nil {
		t.RetentionJob = src.RetentionJob
	}
}

// TxAppend appends a turn with a chosen id to a context-store branch.
type TxAppend struct {
	Branch messages.BranchID
	ID     messages.TurnID
	Req    AppendRequest
}

// EventRecord is an actor's event (or snapshot) at an index of its log.
type EventRecord struct {
	Actor string
	Index uint64
	Data  []byte
}

// TxResult says what a committed Tx did beyond what it asked.
type TxResult struct {
	ChunksSkipped int // chunks already present
}

// CheckActor refuses an actor name an actor log cannot hold: empty, too
// long or with a NUL byte.
func CheckActor(name string) error {
	if name == "" || len(name) > maxActorNameLen {
		return fmt.Errorf("%w: actor name %q must be 1..%d bytes", ErrInvalidArgument, name, maxActorNameLen)
	}
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			return fmt.Errorf("%w: actor name %q contains a NUL byte", ErrInvalidArgument, name)
		}
	}
	return nil
}

// SortJobs orders jobs read in key order (type, then turn) by branch,
// then creation, then turn, keeping the key order of equal ones.
func SortJobs(js []Job) {
	sort.SliceStable(js, func(i, k int) bool {
		if c := js[i].Branch.Compare(js[k].Branch); c != 0 {
			return c < 0
		}
		if !js[i].Created.Equal(js[k].Created) {
			return js[i].Created.Before(js[k].Created)
		}
		return js[i].Turn.Compare(js[k].Turn) < 0
	})
}

// EncodeStepRow is json.Marshal(r) with the raw request and response
// (most of a step row: the request holds the whole context) checked and
// copied in as they are, rather than validated and compacted again by
// the encoder, which costs several times as much on the committer's
// path; they are kept byte for byte as sent and received.
func EncodeStepRow(r StepRow) ([]byte, error) {
	req, resp := r.Request, r.Response
	if len(req) > 0 && !json.Valid(req) || len(resp) > 0 && !json.Valid(resp) {
		return json.Marshal(r) // the encoder's error
	}
	r.Request, r.Response = nil, nil
	rest, err := json.Marshal(r) // an object with fields: "{" + `"id":...}`
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(req)+len(resp)+len(rest)+len(`{"request":,"response":,`))
	b = append(b, '{')
	if len(req) > 0 {
		b = append(append(append(b, `"request":`...), req...), ',')
	}
	if len(resp) > 0 {
		b = append(append(append(b, `"response":`...), resp...), ',')
	}
	return append(b, rest[1:]...), nil
}

// JobTypeCode is the one-byte code of t in a job's key (Badger) or kind
// column (PostgreSQL); false for a type no job has.
func JobTypeCode(t JobType) (byte, bool) {
	c, ok := jobTypeCodes[t]
	return c, ok
}
