package persistence

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// Hard delete (SRD §14.4), engine-neutral. Purge removes a session, or
// branches of one, and everything stored of them: the branches' heads,
// owner rows, rows, turn rows, states, steps, chunks and their partition
// entries and vectors, jobs, idempotency keys, proxy index entries, actor
// event logs and snapshots, and the transcript nodes they own (those
// after each branch's base: a fork's nodes before its fork point are its
// parent's), with the blob references the nodes hold. A node that a
// branch not deleted still reaches (a fork of a deleted branch) is
// ErrInUse, and nothing is written.
//
// PlanPurge reads, through an engine's PurgeReader on one snapshot, what
// a purge of one spec deletes, and decides it: which branches, nodes,
// rows and keys go, what the session becomes, which blob references are
// released. Each engine then executes the plan its own way, all of it or
// nothing: Badger drops the keys from every file (purge.go), PostgreSQL
// deletes the rows in the transaction that read the plan (package pgdb).

// ErrInUse is returned by Purge when what it would delete is part of a
// branch it does not delete (a fork): nothing is deleted.
var ErrInUse = errors.New("persistence: in use by another branch")

// PurgeSpec says what Purge deletes.
type PurgeSpec struct {
	Session messages.SessionID
	// DeleteSession deletes the session: its row and every branch of it
	// (Branches is ignored). Otherwise Branches, each of Session, are
	// deleted and the session stays; if its active branch is one of them,
	// the nearest ancestor not deleted becomes the active branch.
	DeleteSession bool
	Branches      []messages.BranchID
	// Actors are the actors whose event logs and snapshots are deleted
	// (the runtime's names of the branches' actors).
	Actors []string
}

// PurgeResult says what Purge deleted and how long it took.
type PurgeResult struct {
	Branches []messages.BranchID // the branches deleted
	Nodes    int                 // transcript nodes
	Turns    int                 // turn rows
	Blobs    int                 // blobs no longer referenced
	Chunks   int
	// Keys are the Badger keys dropped, every version counted; on
	// PostgreSQL the rows deleted (all on the first of PurgeSessions').
	Keys int
	// Steps are the provider steps deleted (and those the deleted turns
	// name): the caller removes their stream journals.
	Steps []messages.StepID
	// ValueLogPending: a dropped value is still in the value-log file
	// Badger was writing, until the next open: the reads under way held
	// Badger open beyond its reopen wait (purge.go).
	ValueLogPending bool
	Took            time.Duration // the whole call
	// Scrub is Badger's drop, while the store's writes waited; on
	// PostgreSQL the VACUUM after the commit (writes do not wait).
	Scrub time.Duration
}

// Check refuses a spec that names nothing to delete or a bad actor.
func (spec PurgeSpec) Check() error {
	if spec.Session.IsZero() {
		return fmt.Errorf("%w: purge: session id is zero", ErrInvalidArgument)
	}
	if !spec.DeleteSession && len(spec.Branches) == 0 {
		return fmt.Errorf("%w: purge: no branch to delete", ErrInvalidArgument)
	}
	for _, a := range spec.Actors {
		if err := CheckActor(a); err != nil {
			return err
		}
	}
	return nil
}

// CheckPurgeSessions refuses PurgeSessions' specs unless each deletes a
// session, no two the same, with good actors.
func CheckPurgeSessions(specs []PurgeSpec) error {
	seen := map[messages.SessionID]bool{}
	for i, spec := range specs {
		if spec.Session.IsZero() || !spec.DeleteSession {
			return fmt.Errorf("%w: purge sessions: spec %d deletes no session", ErrInvalidArgument, i)
		}
		if seen[spec.Session] {
			return fmt.Errorf("%w: purge sessions: session %s twice", ErrInvalidArgument, spec.Session)
		}
		seen[spec.Session] = true
		if err := spec.Check(); err != nil {
			return err
		}
	}
	return nil
}

// PurgeNode is a transcript node a purge reads: its parent, its payload's
// blob and the base of the branch it was reached from.
type PurgeNode struct {
	ID, Parent messages.NodeID
	Payload    Hash
	Base       messages.NodeID
}

// TurnRowKey names a turn row: the branch it is of and its turn.
type TurnRowKey struct {
	Branch messages.BranchID
	Turn   messages.NodeID
}

// NodeStep is a step row of a transcript node: the node and the step.
type NodeStep struct {
	Turn messages.NodeID
	Step messages.StepID
}

// NodeChunk is a chunk whose source is a transcript node: the node and
// the chunk.
type NodeChunk struct {
	Turn  messages.NodeID
	Chunk messages.ChunkID
}

// PurgeReader is what PlanPurge reads of an engine, every read on one
// snapshot of its store (Badger's read timestamp, PostgreSQL's
// transaction). Errors other than the ones named are the engine's.
type PurgeReader interface {
	// Session returns the row of session id; false when there is none.
	Session(id messages.SessionID) (SessionRow, bool, error)
	// SessionBranches returns the branch rows of session id.
	SessionBranches(id messages.SessionID) ([]BranchRow, error)
	// Heads returns the heads of branches, of those that have one (a
	// branch row whose store branch was never made has none).
	Heads(branches []messages.BranchID) ([]Head, error)
	// Walk returns the nodes from each head's turn back to its base, the
	// base left out, each with that head's base; it may stop early at a
	// missing node (PlanPurge reports it) or fail.
	Walk(heads []Head) ([]PurgeNode, error)
	// HeadsAt returns the heads whose turn or base is one of nodes, in
	// branch order.
	HeadsAt(nodes []messages.NodeID) ([]Head, error)
	// Children calls fn with each child of nodes, in order of parent and
	// child.
	Children(nodes []messages.NodeID, fn func(parent, child messages.NodeID) error) error
	// Overlays returns the overlays of nodes.
	Overlays(nodes []messages.NodeID) ([]Overlay, error)
	// TurnRows calls fn with each turn row of branches.
	TurnRows(branches []messages.BranchID, fn func(TurnRow) error) error
	// Steps returns the step rows of nodes.
	Steps(nodes []messages.NodeID) ([]NodeStep, error)
	// Chunks returns the chunks whose source is one of nodes, each once.
	Chunks(nodes []messages.NodeID) ([]NodeChunk, error)
	// Jobs calls fn with every job.
	Jobs(fn func(Job) error) error
	// Keyed calls fn with the key and JSON of every idempotency row and
	// proxy index entry (keys starting IdempotencyRowPrefix and
	// ProxyEntryPrefix).
	Keyed(fn func(k, v []byte) error) error
}

// PurgePlan is what a purge of one spec deletes, as PlanPurge decided it.
type PurgePlan struct {
	Spec     PurgeSpec
	Branches []messages.BranchID // deleted, in order; = Result.Branches
	Nodes    []PurgeNode         // the transcript nodes they own, in order of id
	Overlays []Overlay           // the nodes' overlays
	TurnRows []TurnRowKey        // every turn row of the branches
	Steps    []NodeStep          // the step rows of the nodes
	Chunks   []NodeChunk         // the chunks of the nodes
	Jobs     []Job               // the branches' jobs
	Keyed    [][]byte            // keys of the idempotency rows and proxy entries that go
	// Unref are the blob references the nodes (and their overlays) hold.
	Unref map[Hash]uint64
	// Session is the session row to write, when the session stays and
	// its active branch goes (to the nearest ancestor kept).
	Session *SessionRow
	// Result is what the plan deletes but the engine's counts (Blobs,
	// Keys) and times.
	Result PurgeResult
}

// NodeIDs returns the ids of the plan's nodes, in order.
func (p *PurgePlan) NodeIDs() []messages.NodeID {
	ids := make([]messages.NodeID, len(p.Nodes))
	for i, n := range p.Nodes {
		ids[i] = n.ID
	}
	return ids
}

// PlanPurge reads through r what a purge of spec deletes. It fails with
// ErrRowNotFound for a session or branch not found, ErrInUse when a
// branch kept reaches a node that would go, ErrInvalidArgument when every
// branch of a session kept would go, and ErrCorrupt for a row it cannot
// read.
func PlanPurge(r PurgeReader, spec PurgeSpec) (*PurgePlan, error) {
	p := &PurgePlan{Spec: spec, Unref: map[Hash]uint64{}}
	sess, ok, err := r.Session(spec.Session)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: session %s", ErrRowNotFound, spec.Session)
	}
	brs, err := r.SessionBranches(spec.Session)
	if err != nil {
		return nil, err
	}
	rows := map[messages.BranchID]BranchRow{} // every branch of the session
	for _, b := range brs {
		rows[b.ID] = b
	}
	del := map[messages.BranchID]bool{}
	if spec.DeleteSession {
		for id := range rows {
			del[id] = true
		}
	} else {
		for _, id := range spec.Branches {
			if _, ok := rows[id]; !ok {
				return nil, fmt.Errorf("%w: branch %s of session %s", ErrRowNotFound, id, spec.Session)
			}
			del[id] = true
		}
	}
	for id := range del {
		p.Branches = append(p.Branches, id)
	}
	slices.SortFunc(p.Branches, messages.BranchID.Compare)
	p.Result.Branches = slices.Clone(p.Branches)

	// The nodes the branches own: from each head to its base.
	heads, err := r.Heads(p.Branches)
	if err != nil {
		return nil, err
	}
	walked, err := r.Walk(heads)
	if err != nil {
		return nil, err
	}
	owned := map[messages.NodeID]PurgeNode{}
	for _, n := range walked {
		owned[n.ID] = n
	}
	// A walk stops at a missing node: every head's turn and every node's
	// parent (but at the base) must have been found.
	for _, h := range heads {
		if _, ok := owned[h.Node]; !ok && h.Node != h.Base && !h.Node.IsZero() {
			return nil, fmt.Errorf("%w: head of branch %s names turn %s, which is missing", ErrCorrupt, h.Branch, h.Node)
		}
	}
	for id, n := range owned {
		if _, ok := owned[n.Parent]; !ok && n.Parent != n.Base && !n.Parent.IsZero() {
			return nil, fmt.Errorf("%w: turn %s names parent %s, which is missing", ErrCorrupt, id, n.Parent)
		}
	}
	for _, n := range owned {
		p.Nodes = append(p.Nodes, n)
	}
	slices.SortFunc(p.Nodes, func(a, b PurgeNode) int { return a.ID.Compare(b.ID) })
	nodes := p.NodeIDs()
	p.Result.Nodes = len(nodes)

	// A node a branch kept reaches: a fork's head or base, or a child
	// that is not deleted.
	at, err := r.HeadsAt(nodes)
	if err != nil {
		return nil, err
	}
	for _, h := range at {
		if del[h.Branch] {
			continue
		}
		if _, ok := owned[h.Node]; ok {
			return nil, fmt.Errorf("%w: branch %s is at turn %s of a branch to delete (a fork): delete it first", ErrInUse, h.Branch, h.Node)
		}
		if _, ok := owned[h.Base]; ok {
			return nil, fmt.Errorf("%w: branch %s was forked at turn %s of a branch to delete: delete it first", ErrInUse, h.Branch, h.Base)
		}
	}
	err = r.Children(nodes, func(parent, child messages.NodeID) error {
		if _, ok := owned[child]; !ok {
			return fmt.Errorf("%w: turn %s of a branch to delete has a child %x on a branch kept (a fork): delete it first",
				ErrInUse, parent, child[:])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	// The blob references the nodes hold: their payloads and overlays
	// (an overlay that purged a payload released its reference then).
	refs := map[messages.NodeID]map[Hash]int{}
	for id, n := range owned {
		refs[id] = map[Hash]int{n.Payload: 1}
	}
	if p.Overlays, err = r.Overlays(nodes); err != nil {
		return nil, err
	}
	for _, ov := range p.Overlays {
		m := refs[ov.Node]
		if m == nil {
			continue // not asked for
		}
		if !ov.Tombstone {
			m[ov.Hash]++
		}
		if !ov.Purged.IsZero() {
			m[ov.Purged]--
		}
	}
	for _, m := range refs {
		for h, n := range m {
			if n > 0 && !h.IsZero() {
				p.Unref[h] += uint64(n)
			}
		}
	}

	// The branches' turn rows; the steps and chunks of the nodes.
	steps := map[messages.StepID]bool{}
	err = r.TurnRows(p.Branches, func(t TurnRow) error {
		p.Result.Turns++
		p.TurnRows = append(p.TurnRows, TurnRowKey{Branch: t.Branch, Turn: t.ID})
		if _, ok := owned[t.ID]; ok && !t.Step.IsZero() {
			steps[t.Step] = true // a turn of the parent the fork carried as pending is the parent's
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if p.Steps, err = r.Steps(nodes); err != nil {
		return nil, err
	}
	for _, s := range p.Steps {
		steps[s.Step] = true
	}
	for s := range steps {
		p.Result.Steps = append(p.Result.Steps, s)
	}
	slices.SortFunc(p.Result.Steps, messages.StepID.Compare)
	if p.Chunks, err = r.Chunks(nodes); err != nil {
		return nil, err
	}
	chunks := map[messages.ChunkID]bool{}
	for _, c := range p.Chunks {
		chunks[c.Chunk] = true
	}
	p.Result.Chunks = len(chunks)

	// Jobs, idempotency keys and proxy entries name their branch in
	// their data: each table is read whole.
	err = r.Jobs(func(j Job) error {
		if del[j.Branch] {
			p.Jobs = append(p.Jobs, j)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = r.Keyed(func(k, v []byte) error {
		if len(k) == 0 {
			return nil
		}
		switch k[0] {
		case IdempotencyRowPrefix:
			var row IdempotencyRow
			if err := json.Unmarshal(v, &row); err != nil {
				return fmt.Errorf("%w: idempotency key %x: %v", ErrCorrupt, k, err)
			}
			if del[row.Owner] || del[row.Branch] || spec.DeleteSession && row.Session == spec.Session {
				p.Keyed = append(p.Keyed, k)
			}
		case ProxyEntryPrefix:
			var t ProxyTarget
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("%w: proxy entry %x: %v", ErrCorrupt, k, err)
			}
			if del[t.Branch] {
				p.Keyed = append(p.Keyed, k)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !spec.DeleteSession && del[sess.ActiveBranch] {
		b := sess.ActiveBranch
		for del[b] && !b.IsZero() {
			b = rows[b].Parent
		}
		if b.IsZero() {
			return nil, fmt.Errorf("%w: every branch of session %s would be deleted: delete the session", ErrInvalidArgument, spec.Session)
		}
		sess.ActiveBranch = b
		p.Session = &sess
	}
	return p, nil
}
