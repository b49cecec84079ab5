package pgdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/commit"
)

// The context store on PostgreSQL. The same contract as
// the Badger store, kept in SQL that CockroachDB and YugabyteDB also run:
// no advisory locks, no LISTEN/NOTIFY, no SERIAL or sequences (ids are
// ULIDs made by the writer; the overlay seq is a counter row updated in the
// transaction that uses it), no partial indexes. Every write transaction is
// SERIALIZABLE and is retried, whole, on a serialization failure (40001),
// a deadlock (40P01) or a unique violation (23505: another writer took a
// key this one saw free).
//
// One committer goroutine per store takes every write waiting (up to
// GroupCommitMax) into one transaction: group commit. A writer is
// acknowledged only after COMMIT returned, and with the server's
// synchronous_commit on (its default), a committed transaction is durable.
// Several stores (several runtimes) may share one database: a head moves
// only by a compare-and-swap on its seq in the transaction that appends
// the turn it points at, so a writer that read a head another one moved
// since never commits.

// ErrOutcomeUnknown is returned by a write whose transaction's COMMIT was
// sent but whose answer never came (the connection broke): it may or may
// not have been committed, wholly either way. A caller that must know
// reads, or appends with ExpectParent.
var ErrOutcomeUnknown = errors.New("persistence: the write may or may not have been committed")

// errConnLost marks a transaction that failed before its COMMIT was sent
// without an answer from the server (the connection broke): it was
// certainly not committed, so the group is retried on another connection.
var errConnLost = errors.New("persistence: postgres connection lost before commit")

// errCASLost marks a head whose compare-and-swap matched no row: another
// writer moved it after this transaction read it. The group is retried.
var errCASLost = errors.New("persistence: head moved by another writer")

// PGOptions configure a PostgreSQL-backed store.
type PGOptions struct {
	// URL is the connection string (postgres://user@host:port/db?...).
	URL    string
	Limits persistence.Limits
	// Compress is the blob codec policy, as for Badger.
	Compress persistence.Compression
	// GroupCommitMax bounds the writes in one transaction.
	GroupCommitMax int
	// MaxConns bounds the pool (readers and the committer).
	MaxConns int32
	// MaxRetries bounds the attempts of one group after retryable failures.
	MaxRetries int
	// NodeCacheEntries bounds the cache of transcript nodes used for skip pointers.
	NodeCacheEntries int
	// GroupTimeout bounds one attempt at a group's transaction.
	GroupTimeout time.Duration
	// PurgeVacuum: after a purge (PGDB.Purge, PurgeSessions) commits, run
	// a plain VACUUM of the tables it deleted from, so that the deleted
	// rows' dead tuples are removed then rather than at the next
	// autovacuum (docs/STORE.md). Best-effort; skipped on CockroachDB.
	PurgeVacuum bool
	Logger      zerolog.Logger
	// Now is the clock for created_at stamps and ids (default time.Now).
	Now func() time.Time
}

// DefaultPGOptions returns the options for a store at url.
func DefaultPGOptions(url string) PGOptions {
	return PGOptions{
		URL:              url,
		Limits:           persistence.Limits{MaxPayloadBytes: persistence.DefaultMaxPayloadBytes},
		Compress:         persistence.CompressZstd,
		GroupCommitMax:   256,
		MaxConns:         16,
		MaxRetries:       30,
		NodeCacheEntries: 1 << 16,
		GroupTimeout:     60 * time.Second,
		PurgeVacuum:      true,
		Logger:           zerolog.Nop(),
	}
}

// pgSchema is run at every open; every statement is idempotent.
var pgSchema = []string{
	`CREATE TABLE IF NOT EXISTS ctx_blobs (
		hash BYTEA PRIMARY KEY,
		rec  BYTEA NOT NULL,
		refs BIGINT NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS ctx_turns (
		id         BYTEA PRIMARY KEY,
		parent     BYTEA NOT NULL,
		depth      BIGINT NOT NULL,
		type_tag   BIGINT NOT NULL,
		codec      BIGINT NOT NULL,
		hash       BYTEA NOT NULL,
		flags      BIGINT NOT NULL,
		created_ms BIGINT NOT NULL,
		skips      BYTEA NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS ctx_turns_parent ON ctx_turns (parent, id)`,
	`CREATE TABLE IF NOT EXISTS ctx_heads (
		branch     BYTEA PRIMARY KEY,
		turn       BYTEA NOT NULL,
		depth      BIGINT NOT NULL,
		base       BYTEA NOT NULL,
		created_ms BIGINT NOT NULL,
		seq        BIGINT NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS ctx_overlays (
		seq        BIGINT PRIMARY KEY,
		turn       BYTEA NOT NULL,
		tombstone  BOOLEAN NOT NULL,
		hash       BYTEA NOT NULL,
		purged     BYTEA NOT NULL,
		created_ms BIGINT NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS ctx_overlays_turn ON ctx_overlays (turn, seq)`,
	`CREATE TABLE IF NOT EXISTS ctx_counters (
		name  TEXT PRIMARY KEY,
		value BIGINT NOT NULL
	)`,
	`INSERT INTO ctx_counters (name, value) VALUES ('overlay_seq', 0), ('schema_version', 1)
		ON CONFLICT (name) DO NOTHING`,
	// The lifecycle rows of PGDB (pg_db.go): each row's JSON, exactly the
	// bytes Badger stores, in data, beside the columns its keys and
	// reads need. Added to schema version 1: new tables only, which a
	// build without them never reads.
	`CREATE TABLE IF NOT EXISTS ctx_sessions (
		id     BYTEA PRIMARY KEY,
		tenant TEXT NOT NULL,
		data   BYTEA NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS ctx_sessions_tenant ON ctx_sessions (tenant, id)`,
	`CREATE TABLE IF NOT EXISTS ctx_branches (
		id         BYTEA PRIMARY KEY,
		session_id BYTEA NOT NULL,
		data       BYTEA NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS ctx_branches_session ON ctx_branches (session_id, id)`,
	`CREATE TABLE IF NOT EXISTS ctx_turn_rows (
		branch BYTEA NOT NULL,
		seq    BIGINT NOT NULL,
		id     BYTEA NOT NULL,
		data   BYTEA NOT NULL,
		PRIMARY KEY (branch, seq)
	)`,
	`CREATE INDEX IF NOT EXISTS ctx_turn_rows_id ON ctx_turn_rows (id, branch, seq)`,
	`CREATE TABLE IF NOT EXISTS ctx_states (
		branch BYTEA NOT NULL,
		seq    BIGINT NOT NULL,
		data   BYTEA NOT NULL,
		PRIMARY KEY (branch, seq)
	)`,
	`CREATE TABLE IF NOT EXISTS ctx_steps (
		turn BYTEA NOT NULL,
		idx  BIGINT NOT NULL,
		id   BYTEA NOT NULL,
		data BYTEA NOT NULL,
		PRIMARY KEY (turn, idx)
	)`,
	`CREATE INDEX IF NOT EXISTS ctx_steps_id ON ctx_steps (id, turn, idx)`,
	`CREATE TABLE IF NOT EXISTS ctx_jobs (
		kind   SMALLINT NOT NULL,
		turn   BYTEA NOT NULL,
		data   BYTEA NOT NULL,
		PRIMARY KEY (kind, turn)
	)`,
	// The retrieval rows and actor logs of PGDB (pg_db_actor.go): chunk
	// rows (their JSON), partition entries (encodeDoc), vectors (float32
	// little endian) and snapshot records (uvarint index | bytes) hold
	// exactly the bytes Badger stores. Actor names are BYTEA, as Badger
	// takes any bytes but NUL. New tables of schema version 1.
	`CREATE TABLE IF NOT EXISTS ctx_chunks (
		source_turn BYTEA NOT NULL,
		type        SMALLINT NOT NULL,
		hash        BYTEA NOT NULL,
		id          BYTEA NOT NULL,
		data        BYTEA NOT NULL,
		PRIMARY KEY (source_turn, type, hash)
	)`,
	`CREATE INDEX IF NOT EXISTS ctx_chunks_id ON ctx_chunks (id, source_turn, type, hash)`,
	`CREATE TABLE IF NOT EXISTS ctx_chunk_members (
		branch BYTEA NOT NULL,
		seq    BIGINT NOT NULL,
		chunk  BYTEA NOT NULL,
		data   BYTEA NOT NULL,
		PRIMARY KEY (branch, seq, chunk)
	)`,
	`CREATE TABLE IF NOT EXISTS ctx_vectors (
		namespace BYTEA NOT NULL,
		chunk     BYTEA NOT NULL,
		data      BYTEA NOT NULL,
		PRIMARY KEY (namespace, chunk)
	)`,
	`CREATE TABLE IF NOT EXISTS ctx_events (
		actor BYTEA NOT NULL,
		idx   BIGINT NOT NULL,
		data  BYTEA NOT NULL,
		PRIMARY KEY (actor, idx)
	)`,
	`CREATE TABLE IF NOT EXISTS ctx_snapshots (
		kind  SMALLINT NOT NULL,
		actor BYTEA NOT NULL,
		data  BYTEA NOT NULL,
		PRIMARY KEY (kind, actor)
	)`,
	// The idempotency keys and proxy index of PGDB (pg_db_index.go):
	// each row under its Badger key, with Badger's bytes. Written once,
	// never updated. A new table of schema version 1.
	`CREATE TABLE IF NOT EXISTS ctx_keyed (
		key  BYTEA PRIMARY KEY,
		data BYTEA NOT NULL
	)`,
	// The owners of branches made with BranchSpec.Tenant and of the roots
	// appended to them (pg_db_tenancy.go), Badger's A and Z rows: the
	// tenant's name, its bytes. New tables of schema version 1.
	`CREATE TABLE IF NOT EXISTS ctx_branch_tenants (
		branch BYTEA PRIMARY KEY,
		tenant BYTEA NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS ctx_root_tenants (
		turn   BYTEA PRIMARY KEY,
		tenant BYTEA NOT NULL
	)`,
	// The imports under way of PGDB (ImportRow's JSON, by session). A
	// new table of schema version 1.
	`CREATE TABLE IF NOT EXISTS ctx_imports (
		session BYTEA PRIMARY KEY,
		data    BYTEA NOT NULL
	)`,
	// Retention of PGDB (pg_db_retention.go): a session's latest touch
	// (unix nanoseconds) and the retention job's record (its JSON). New
	// tables of schema version 1.
	`CREATE TABLE IF NOT EXISTS ctx_activity (
		session BYTEA PRIMARY KEY,
		at      BIGINT NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS ctx_meta (
		name TEXT PRIMARY KEY,
		data BYTEA NOT NULL
	)`,
	// The stream journals (pg_journal.go): a row per sync of a step's
	// journal, at the offset of its first byte. New in schema version 1.
	`CREATE TABLE IF NOT EXISTS ctx_journals (
		step  BYTEA NOT NULL,
		off   BIGINT NOT NULL,
		bytes BYTEA NOT NULL,
		PRIMARY KEY (step, off)
	)`,
}

// pgSchemaVersion is the layout above; an open refuses any other.
const pgSchemaVersion = 1

// pgStore implements Store on PostgreSQL.
type pgStore struct {
	pool  *pgxpool.Pool
	opts  PGOptions
	log   zerolog.Logger
	turns *persistence.NodeCache

	ops   *commit.Queue[*op]
	done  chan struct{}
	stats commit.Counters

	spaceMu    sync.Mutex
	diskFullAt time.Time // when a group last failed on disk_full; zero once one committed since (pg_db_limits.go)

	// testHook, when set (tests only), is called by the committer at each
	// stage of an attempt ("read": after the group's reads, "commit": just
	// before COMMIT) with the transaction.
	testHook func(stage string, attempt int, tx pgx.Tx)
}

// OpenPostgres connects to the database at opts.URL, creates the store's
// tables if they are missing and starts the committer.
func OpenPostgres(ctx context.Context, opts PGOptions) (persistence.Store, error) {
	return openPostgres(ctx, opts)
}

func openPostgres(ctx context.Context, opts PGOptions) (*pgStore, error) {
	if opts.URL == "" {
		return nil, fmt.Errorf("%w: postgres url is empty (store.postgres_url_env names the variable holding it)", persistence.ErrInvalidArgument)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Limits.MaxPayloadBytes <= 0 {
		opts.Limits.MaxPayloadBytes = persistence.DefaultMaxPayloadBytes
	}
	if err := checkPGLimits(opts.Limits); err != nil {
		return nil, err
	}
	if opts.GroupCommitMax <= 0 {
		opts.GroupCommitMax = 1
	}
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = 1
	}
	if opts.GroupTimeout <= 0 {
		opts.GroupTimeout = 60 * time.Second
	}
	cfg, err := pgxpool.ParseConfig(opts.URL)
	if err != nil {
		// pgx's message may quote the URL, password included.
		return nil, fmt.Errorf("%w: postgres url does not parse (store.postgres_url_env names the variable holding it)", persistence.ErrInvalidArgument)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres pool: %w", err)
	}
	s := &pgStore{
		pool:  pool,
		opts:  opts,
		log:   opts.Logger,
		turns: persistence.NewNodeCache(opts.NodeCacheEntries),
		ops:   commit.NewQueue[*op](opts.GroupCommitMax),
		done:  make(chan struct{}),
	}
	if err := s.createSchema(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	go s.commitLoop()
	return s, nil
}

// createSchema creates the tables, retrying when another store opening
// on the same database at once races it (CREATE ... IF NOT EXISTS is not
// atomic against a concurrent one in PostgreSQL).
func (s *pgStore) createSchema(ctx context.Context) error {
	var err error
	// Each attempt gets past the statements a racer finished; under load
	// racers can collide on several in a row, so the bound is generous.
	for attempt := range 100 {
		if attempt > 0 {
			backoff(min(attempt, 10))
		}
		err = func() error {
			for _, q := range pgSchema {
				if _, err := s.pool.Exec(ctx, q); err != nil {
					return err
				}
			}
			return nil
		}()
		// 42P07 duplicate_table, 42710 duplicate_object (the table's row
		// type): the racing creator made it first.
		if err == nil || !retryablePG(err) && pgCode(err) != "42P07" && pgCode(err) != "42710" {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("create postgres schema: %w", err)
	}
	var v int64
	if err := s.pool.QueryRow(ctx, `SELECT value FROM ctx_counters WHERE name = 'schema_version'`).Scan(&v); err != nil {
		return fmt.Errorf("read postgres schema version: %w", err)
	}
	if v != pgSchemaVersion {
		return fmt.Errorf("%w: postgres schema version %d, this build knows %d", persistence.ErrCorrupt, v, pgSchemaVersion)
	}
	return nil
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// connGone reports whether err says the connection is gone: no answer
// from the server, or a connection exception (class 08) or an operator
// intervention (57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot
// connect now) that ends the session.
func connGone(err error) bool {
	c := pgCode(err)
	return c == "" || strings.HasPrefix(c, "08") || strings.HasPrefix(c, "57P")
}

// unavailableError is an error of a database that could not be reached
// or ended the connection: ErrUnavailable, with the driver's text.
type unavailableError struct{ err error }

func (e unavailableError) Error() string   { return e.err.Error() }
func (e unavailableError) Unwrap() []error { return []error{e.err, persistence.ErrUnavailable} }

// unavailable marks err as ErrUnavailable if it says the database could
// not be reached (a failed connect, a broken connection) or ended the
// session (class 08, 57P01-57P03).
func unavailable(err error) error {
	if err == nil || errors.Is(err, persistence.ErrUnavailable) {
		return err
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	c := pgCode(err)
	if errors.As(err, &ce) || strings.HasPrefix(c, "08") || strings.HasPrefix(c, "57P") ||
		(c == "" && (errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err))) {
		return unavailableError{err}
	}
	return err
}

// retryablePG reports whether a failed transaction was certainly rolled
// back for a reason that trying again may cure.
func retryablePG(err error) bool {
	switch pgCode(err) {
	case "40001", "40P01", "23505":
		return true
	}
	return errors.Is(err, errCASLost) || errors.Is(err, errConnLost)
}

// backoff waits before attempt (1, 2, ...): exponential with jitter, at
// most about 100 ms.
func backoff(attempt int) {
	d := time.Duration(min(1<<min(attempt, 7), 100)) * time.Millisecond
	time.Sleep(d/2 + rand.N(d/2+1))
}

func (s *pgStore) Close() error {
	if !s.ops.Close() {
		return nil
	}
	<-s.done
	s.pool.Close()
	return nil
}

func (s *pgStore) alive() error {
	if s.ops.Closed() {
		return persistence.ErrClosed
	}
	return nil
}

// readErr translates an error of a read: ErrClosed once the store closed.
func (s *pgStore) readErr(what string, err error) error {
	if err == nil {
		return nil
	}
	if s.alive() != nil {
		return persistence.ErrClosed
	}
	return unavailable(fmt.Errorf("postgres: %s: %w", what, err))
}

func (s *pgStore) Stats() persistence.Stats { return s.stats.Stats() }

// ---- the write path ----

func (s *pgStore) submit(ctx context.Context, o *op) error {
	return s.stats.Counted(s.ops.Submit(ctx, o))
}

func (s *pgStore) Append(ctx context.Context, branch messages.BranchID, req persistence.AppendRequest) (persistence.Node, error) {
	if err := persistence.CheckAppend(branch, req, s.opts.Limits); err != nil {
		return persistence.Node{}, err
	}
	if err := s.alive(); err != nil {
		return persistence.Node{}, err
	}
	// Hash and compress on the caller's goroutine, in parallel.
	o := &op{kind: opAppend, branch: branch, append: req, hash: persistence.HashOf(req.Payload),
		blob: persistence.EncodeBlob(req.Payload, s.opts.Compress)}
	if err := s.submit(ctx, o); err != nil {
		return persistence.Node{}, err
	}
	return o.res.turn, nil
}

func (s *pgStore) CreateBranch(ctx context.Context, spec persistence.BranchSpec) (persistence.Head, error) {
	o := &op{kind: opBranch, spec: spec}
	if err := s.submit(ctx, o); err != nil {
		return persistence.Head{}, err
	}
	return o.res.head, nil
}

func (s *pgStore) PutOverlay(ctx context.Context, turn messages.NodeID, req persistence.OverlayRequest) (persistence.Overlay, error) {
	if err := persistence.CheckOverlay(turn, req, s.opts.Limits); err != nil {
		return persistence.Overlay{}, err
	}
	o := &op{kind: opOverlay, turn: turn, ovReq: req}
	if !req.Tombstone {
		o.hash, o.blob = persistence.HashOf(req.Payload), persistence.EncodeBlob(req.Payload, s.opts.Compress)
	}
	if err := s.submit(ctx, o); err != nil {
		return persistence.Overlay{}, err
	}
	return o.res.overlay, nil
}

func (s *pgStore) commitLoop() {
	defer close(s.done)
	s.ops.Run(s.opts.GroupCommitMax, s.commitGroup)
}

// commitGroup runs batch as one transaction, retrying it whole while it
// fails for a retryable reason, and then wakes its writers.
func (s *pgStore) commitGroup(batch []*op) {
	var err error
	for attempt := 0; attempt < s.opts.MaxRetries; attempt++ {
		if attempt > 0 {
			s.stats.Retried()
			backoff(attempt)
		}
		var g *pgGroup
		start := time.Now()
		g, err = s.tryGroup(batch, attempt)
		err = s.noteWrite(err)
		if err == nil {
			s.publish(g, batch, time.Since(start))
			return
		}
		if !retryablePG(err) {
			break
		}
		s.log.Debug().Err(err).Int("attempt", attempt).Msg("postgres group retried")
	}
	if !errors.Is(err, ErrOutcomeUnknown) && retryablePG(err) {
		err = fmt.Errorf("postgres: group of %d writes gave up after %d attempts: %w", len(batch), s.opts.MaxRetries, err)
	}
	err = unavailable(err)
	s.log.Warn().Err(err).Int("writes", len(batch)).Msg("postgres group failed")
	for _, o := range batch {
		o.res = result{err: err}
		o.Finish(err)
	}
}

// publish counts a committed group and wakes its writers.
func (s *pgStore) publish(g *pgGroup, batch []*op, took time.Duration) {
	s.stats.Add(g.st)
	s.stats.Group(g.wrote, took)
	for _, r := range g.newTurns {
		s.turns.Put(r)
	}
	for i, o := range batch {
		o.res = g.results[i]
		o.Finish(o.res.err)
	}
}

// pgHead is a branch head as a group sees it.
type pgHead struct {
	head    persistence.Head
	seq     int64 // the seq read (0 for a branch this group creates)
	existed bool  // the row existed when read
	moves   int64 // appends of this group to it
	// tenant is the branch's owner (BranchSpec.Tenant; "" for none),
	// when tenantKnown: set by newBranch, or read by the first root
	// appended to it (pg_db_tenancy.go).
	tenant      string
	tenantKnown bool
}

// pgBlob is a blob as a group sees it.
type pgBlob struct {
	existed bool
	refs0   int64 // refs when read
	refs    int64
	rec     []byte // the encoded record, when this group writes it
}

// pgGroup is one attempt at a group: what it read, what it changes.
type pgGroup struct {
	s       *pgStore
	ctx     context.Context
	tx      pgx.Tx
	heads   map[messages.BranchID]*pgHead
	blobs   map[persistence.Hash]*pgBlob
	turns   map[messages.NodeID]persistence.NodeRecord // read or written by this group
	ovs     map[messages.NodeID][]persistence.Overlay  // a turn's overlays, read and new
	ovSeq0  int64                                      // the overlay counter when read
	ovSeq   uint64
	ovRead  bool
	results []result
	// what to write, in order
	newBranches []messages.BranchID
	newTurns    []persistence.NodeRecord
	newOvs      []persistence.Overlay
	rootTenants []pgRootTenant // the owners of new roots of branches with one
	rows        *pgRows        // lifecycle rows of the group's Txs (pg_db.go); nil without any
	wrote       bool
	st          commit.GroupStats
}

// tryGroup runs one attempt. Errors of single writes (a head mismatch, an
// unknown turn) are in the group's results; a returned error is the
// whole transaction's.
func (s *pgStore) tryGroup(batch []*op, attempt int) (*pgGroup, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.GroupTimeout)
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		// A pooled connection the server ended while it was idle (a
		// failover, pg_terminate_backend) answers BEGIN with its FATAL
		// 57P01: nothing was begun, and another connection may do.
		if connGone(err) {
			err = fmt.Errorf("%w: %w", errConnLost, err)
		}
		return nil, fmt.Errorf("postgres: begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			tx.Rollback(context.Background())
		}
	}()
	g := &pgGroup{
		s: s, ctx: ctx, tx: tx,
		heads:   make(map[messages.BranchID]*pgHead),
		blobs:   make(map[persistence.Hash]*pgBlob),
		turns:   make(map[messages.NodeID]persistence.NodeRecord),
		ovs:     make(map[messages.NodeID][]persistence.Overlay),
		results: make([]result, len(batch)),
	}
	// Before COMMIT, a failure leaves nothing committed: one without the
	// server's answer (a broken connection) is worth another attempt.
	beforeCommit := func(err error) error {
		if retryablePG(err) || isWriteError(err) || errors.Is(err, persistence.ErrCorrupt) {
			return err
		}
		if connGone(err) {
			return fmt.Errorf("%w: %w", errConnLost, err)
		}
		return err
	}
	if err := g.prefetch(batch); err != nil {
		return nil, beforeCommit(err)
	}
	for i, o := range batch {
		r, err := g.apply(o)
		if err != nil {
			return nil, beforeCommit(err)
		}
		g.results[i] = r
	}
	if s.testHook != nil {
		s.testHook("read", attempt, tx)
	}
	if err := g.write(); err != nil {
		return nil, beforeCommit(err)
	}
	if s.testHook != nil {
		s.testHook("commit", attempt, tx)
	}
	if err := tx.Commit(ctx); err != nil {
		committed = true // nothing to roll back: the server ended the transaction, or we cannot tell
		return nil, commitError(err)
	}
	committed = true
	return g, nil
}

// commitError classifies a failed COMMIT. Only a rollback the server
// reported (class 40 but 40003, whose outcome is unknown, or a constraint
// checked at commit, class 23) or a COMMIT never sent is certain; any
// other failure, a broken connection or a FATAL such as 57P01 (the
// server may end a session right after it committed), may have committed.
func commitError(err error) error {
	c := pgCode(err)
	switch {
	case c == "" && pgconn.SafeToRetry(err):
		return fmt.Errorf("%w: postgres: commit: %w", errConnLost, err)
	case strings.HasPrefix(c, "40") && c != "40003", strings.HasPrefix(c, "23"):
		return fmt.Errorf("postgres: commit: %w", err)
	}
	return fmt.Errorf("%w: postgres: commit: %w", ErrOutcomeUnknown, err)
}

// prefetch reads, in one round trip, the heads and blobs the group's
// writes name.
func (g *pgGroup) prefetch(batch []*op) error {
	var branches, hashes, turns [][]byte
	ovs := false
	for _, o := range batch {
		switch o.kind {
		case opAppend:
			branches = append(branches, o.branch[:])
			hashes = append(hashes, o.hash[:])
		case opBranch:
			if !o.spec.ID.IsZero() {
				branches = append(branches, o.spec.ID[:])
			}
		case opOverlay:
			ovs = true
			turns = append(turns, o.turn[:])
			if !o.ovReq.Tombstone {
				hashes = append(hashes, o.hash[:])
			}
		case opTx:
			for _, spec := range o.tx.NewBranches {
				if !spec.ID.IsZero() {
					branches = append(branches, spec.ID[:])
				}
			}
			for i, a := range o.tx.Appends {
				branches = append(branches, a.Branch[:])
				hashes = append(hashes, o.parts[i].hash[:])
			}
		}
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT branch, turn, depth, base, created_ms, seq FROM ctx_heads WHERE branch = ANY($1)`, branches)
	b.Queue(`SELECT hash, refs FROM ctx_blobs WHERE hash = ANY($1)`, hashes)
	if ovs {
		b.Queue(`SELECT value FROM ctx_counters WHERE name = 'overlay_seq'`)
		b.Queue(`SELECT seq, turn, tombstone, hash, purged, created_ms FROM ctx_overlays
			WHERE turn = ANY($1) ORDER BY seq`, turns)
	}
	br := g.tx.SendBatch(g.ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("postgres: read heads: %w", err)
	}
	for rows.Next() {
		var id, turn, base []byte
		var depth, created, seq int64
		if err := rows.Scan(&id, &turn, &depth, &base, &created, &seq); err != nil {
			rows.Close()
			return fmt.Errorf("postgres: read heads: %w", err)
		}
		h, err := pgHeadRow(id, turn, depth, base, created)
		if err != nil {
			rows.Close()
			return err
		}
		g.heads[h.Branch] = &pgHead{head: h, seq: seq, existed: true}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: read heads: %w", err)
	}
	if rows, err = br.Query(); err != nil {
		return fmt.Errorf("postgres: read blobs: %w", err)
	}
	for rows.Next() {
		var hb []byte
		var refs int64
		if err := rows.Scan(&hb, &refs); err != nil {
			rows.Close()
			return fmt.Errorf("postgres: read blobs: %w", err)
		}
		var h persistence.Hash
		if len(hb) != len(h) {
			rows.Close()
			return fmt.Errorf("%w: blob hash of %d bytes", persistence.ErrCorrupt, len(hb))
		}
		copy(h[:], hb)
		g.blobs[h] = &pgBlob{existed: true, refs0: refs, refs: refs}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: read blobs: %w", err)
	}
	if ovs {
		if err := br.QueryRow().Scan(&g.ovSeq0); err != nil {
			return fmt.Errorf("postgres: read overlay seq: %w", err)
		}
		g.ovSeq, g.ovRead = uint64(g.ovSeq0), true
		if rows, err = br.Query(); err != nil {
			return fmt.Errorf("postgres: read overlays: %w", err)
		}
		for _, t := range turns {
			id, _ := messages.IDFromBytes[messages.NodeID](t)
			g.ovs[id] = nil // read: none unless rows follow
		}
		for rows.Next() {
			o, err := scanOverlay(rows)
			if err != nil {
				rows.Close()
				return err
			}
			g.ovs[o.Node] = append(g.ovs[o.Node], o)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("postgres: read overlays: %w", err)
		}
	}
	if err := br.Close(); err != nil {
		return err
	}
	return g.prefetchRows(batch)
}

func pgHeadRow(id, turn []byte, depth int64, base []byte, created int64) (persistence.Head, error) {
	var h persistence.Head
	if len(id) != 16 || len(turn) != 16 || len(base) != 16 || depth < 0 {
		return h, fmt.Errorf("%w: head row of branch %x", persistence.ErrCorrupt, id)
	}
	copy(h.Branch[:], id)
	copy(h.Node[:], turn)
	copy(h.Base[:], base)
	h.Depth = uint64(depth)
	h.CreatedAt = time.UnixMilli(created)
	return h, nil
}

// scanOverlay reads seq, turn, tombstone, hash, purged, created_ms.
func scanOverlay(rows pgx.Rows) (persistence.Overlay, error) {
	var seq, created int64
	var turn, hash, purged []byte
	var o persistence.Overlay
	if err := rows.Scan(&seq, &turn, &o.Tombstone, &hash, &purged, &created); err != nil {
		return o, fmt.Errorf("postgres: read overlays: %w", err)
	}
	if len(turn) != 16 || len(hash) != 32 || len(purged) != 32 || seq <= 0 {
		return o, fmt.Errorf("%w: overlay row %d", persistence.ErrCorrupt, seq)
	}
	copy(o.Node[:], turn)
	copy(o.Hash[:], hash)
	copy(o.Purged[:], purged)
	o.Seq = uint64(seq)
	o.CreatedAt = time.UnixMilli(created)
	return o, nil
}

// apply validates one write against what the group read and wrote before
// it and, when it is valid, records its changes. The result carries the
// write's own error; a returned error fails the transaction.
func (g *pgGroup) apply(o *op) (result, error) {
	switch o.kind {
	case opAppend:
		t, err := g.appendTurn(o)
		if err != nil && !isWriteError(err) {
			return result{}, err
		}
		return result{turn: t, err: err}, nil
	case opBranch:
		h, err := g.newBranch(o.spec)
		if err != nil && !isWriteError(err) {
			return result{}, err
		}
		return result{head: h, err: err}, nil
	case opOverlay:
		ov, err := g.putOverlay(o)
		if err != nil && !isWriteError(err) {
			return result{}, err
		}
		return result{overlay: ov, err: err}, nil
	case opTx:
		return g.applyTx(o)
	}
	return result{err: fmt.Errorf("persistence: unknown op %d", o.kind)}, nil
}

// isWriteError reports whether err is a write's own failure (bad input, a
// missing or taken id, a head mismatch), not the transaction's.
func isWriteError(err error) bool {
	return errors.Is(err, persistence.ErrNotFound) || errors.Is(err, persistence.ErrInvalidArgument) || errors.Is(err, persistence.ErrBranchExists) ||
		errors.Is(err, persistence.ErrHeadMismatch) || errors.Is(err, persistence.ErrDuplicate)
}

func (g *pgGroup) head(b messages.BranchID) (*pgHead, error) {
	if err := persistence.CheckBranchID(b); err != nil {
		return nil, err
	}
	h, ok := g.heads[b]
	if !ok {
		return nil, persistence.BranchNotFound(b)
	}
	return h, nil
}

// record returns a turn: written by this group, cached, or read.
func (g *pgGroup) record(id messages.NodeID) (persistence.NodeRecord, error) {
	if r, ok := g.turns[id]; ok {
		return r, nil
	}
	if r, ok := g.s.turns.Get(id); ok {
		return r, nil
	}
	r, err := g.s.readRecord(g.ctx, g.tx, id)
	if err == nil {
		g.turns[id] = r
	}
	return r, err
}

// recordTx returns a turn written or read by this group, or reads it in
// the group's transaction, never from the store's cache: a turn another
// runtime purged stays in this one's cache, so a write that takes a turn
// as given (a fork point, an overlay's turn, an id said to be taken)
// reads it where the purge's transaction conflicts with it.
func (g *pgGroup) recordTx(id messages.NodeID) (persistence.NodeRecord, error) {
	if r, ok := g.turns[id]; ok {
		return r, nil
	}
	r, err := g.s.readRecord(g.ctx, g.tx, id)
	if err == nil {
		g.turns[id] = r
	}
	return r, err
}

func (g *pgGroup) appendTurn(o *op) (persistence.Node, error) {
	return g.appendNode(o, messages.NodeID{})
}

// appendNode appends o's turn to its branch with id, or a new id when id
// is zero; a chosen id that names a turn already stored is ErrDuplicate.
func (g *pgGroup) appendNode(o *op, id messages.NodeID) (persistence.Node, error) {
	ph, err := g.head(o.branch)
	if err != nil {
		return persistence.Node{}, err
	}
	h := ph.head
	if want := o.append.ExpectParent; want != nil && *want != h.Node {
		return persistence.Node{}, &persistence.HeadMismatchError{Branch: o.branch, Want: *want, Got: h.Node}
	}
	now := g.s.opts.Now()
	if id.IsZero() {
		id = messages.NewID[messages.NodeID](now)
	} else if _, err := g.recordTx(id); err == nil {
		return persistence.Node{}, fmt.Errorf("%w: turn %s already exists", persistence.ErrDuplicate, id)
	} else if !errors.Is(err, persistence.ErrNodeNotFound) {
		return persistence.Node{}, err
	}
	r := persistence.NodeRecord{Node: persistence.Node{
		ID:          id,
		TypeTag:     o.append.TypeTag,
		Codec:       o.append.Codec,
		PayloadHash: o.hash,
		Flags:       o.append.Flags,
		CreatedAt:   timeMillis(now),
	}}
	if !h.Empty() {
		r.Parent, r.Depth = h.Node, h.Depth+1
		if r.Skips, err = g.skips(r.Parent, r.Depth); err != nil {
			return persistence.Node{}, err
		}
	}
	g.addRef(o.hash, o.blob, len(o.append.Payload))
	if h.Empty() {
		if err := g.ownRoot(o.branch, ph, r.ID); err != nil {
			return persistence.Node{}, err
		}
	}
	g.turns[r.ID] = r
	g.newTurns = append(g.newTurns, r)
	ph.head.Node, ph.head.Depth = r.ID, r.Depth
	ph.moves++
	g.st.Appends++
	return r.Node, nil
}

// skips computes the skip pointers of a new turn at depth d whose parent
// is parent: ptr_k = ptr_{k-1}(ptr_{k-1}), ptr_0 being the parent.
func (g *pgGroup) skips(parent messages.NodeID, d uint64) ([]messages.NodeID, error) {
	n := persistence.SkipLevels(d)
	if n == 0 {
		return nil, nil
	}
	out := make([]messages.NodeID, n)
	prev := parent
	for k := 1; k <= n; k++ {
		r, err := g.record(prev)
		if err != nil {
			return nil, fmt.Errorf("skip pointers of a turn at depth %d: %w", d, err)
		}
		if k == 1 {
			out[0] = r.Parent
		} else {
			if len(r.Skips) < k-1 {
				return nil, fmt.Errorf("%w: turn %s has %d skip pointers, want %d", persistence.ErrCorrupt, r.ID, len(r.Skips), k-1)
			}
			out[k-1] = r.Skips[k-2]
		}
		prev = out[k-1]
	}
	return out, nil
}

// addRef counts one more reference to blob h (rec is its record, written
// when the blob is new).
func (g *pgGroup) addRef(h persistence.Hash, rec []byte, rawLen int) {
	b, ok := g.blobs[h]
	if !ok {
		b = &pgBlob{}
		g.blobs[h] = b
	}
	if b.refs > 0 {
		g.st.BlobDedups++
	} else if !b.existed || b.refs0 == 0 {
		b.rec = rec
		g.st.BlobWrites++
		g.st.StoredBytes += uint64(len(rec))
		g.st.RawBytes += uint64(rawLen)
	}
	b.refs++
}

func (g *pgGroup) newBranch(spec persistence.BranchSpec) (persistence.Head, error) {
	now := g.s.opts.Now()
	if len(spec.Tenant) > persistence.MaxTenantName {
		return persistence.Head{}, fmt.Errorf("%w: tenant: %d bytes, limit %d", persistence.ErrInvalidArgument, len(spec.Tenant), persistence.MaxTenantName)
	}
	id := spec.ID
	if id.IsZero() {
		id = messages.NewID[messages.BranchID](now)
	}
	if _, ok := g.heads[id]; ok {
		return persistence.Head{}, fmt.Errorf("%w: %s", persistence.ErrBranchExists, id)
	}
	h := persistence.Head{Branch: id, CreatedAt: timeMillis(now)}
	if !spec.At.IsZero() {
		r, err := g.recordTx(spec.At)
		if err != nil {
			return persistence.Head{}, fmt.Errorf("fork at turn: %w", err)
		}
		h.Node, h.Depth, h.Base = r.ID, r.Depth, r.ID
	}
	ph := &pgHead{head: h, tenantKnown: true}
	if spec.Tenant != persistence.DefaultTenant {
		ph.tenant = spec.Tenant
	}
	g.heads[id] = ph
	g.newBranches = append(g.newBranches, id)
	return h, nil
}

func (g *pgGroup) putOverlay(o *op) (persistence.Overlay, error) {
	r, err := g.recordTx(o.turn)
	if err != nil {
		return persistence.Overlay{}, err
	}
	ov := persistence.Overlay{Node: o.turn, Seq: g.ovSeq + 1, Tombstone: o.ovReq.Tombstone, CreatedAt: timeMillis(g.s.opts.Now())}
	current := r.PayloadHash
	if os := g.ovs[o.turn]; len(os) > 0 {
		current = os[len(os)-1].Hash
	}
	if !ov.Tombstone {
		ov.Hash = o.hash
		g.addRef(o.hash, o.blob, len(o.ovReq.Payload))
	}
	if o.ovReq.Purge && !current.IsZero() {
		b, ok := g.blobs[current]
		if !ok {
			var refs int64
			err := g.tx.QueryRow(g.ctx, `SELECT refs FROM ctx_blobs WHERE hash = $1`, current[:]).Scan(&refs)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				b = &pgBlob{}
			case err != nil:
				return persistence.Overlay{}, fmt.Errorf("postgres: read refs of blob %s: %w", current, err)
			default:
				b = &pgBlob{existed: true, refs0: refs, refs: refs}
			}
			g.blobs[current] = b
		}
		if b.refs > 0 {
			b.refs--
		}
		ov.Purged = current
	}
	g.ovSeq = ov.Seq
	g.ovs[o.turn] = append(g.ovs[o.turn], ov)
	g.newOvs = append(g.newOvs, ov)
	return ov, nil
}

// pgCheck is what a statement of a write batch must do: what names it in
// errors; cas, that it changes exactly one row (else errCASLost).
type pgCheck struct {
	what string
	cas  bool
}

// write sends the group's changes in one round trip. A head moves only
// when its seq is still the one read: otherwise errCASLost.
func (g *pgGroup) write() error {
	b := &pgx.Batch{}
	var checks []pgCheck
	for h, bl := range g.blobs {
		switch {
		case !bl.existed && bl.refs > 0:
			b.Queue(`INSERT INTO ctx_blobs (hash, rec, refs) VALUES ($1, $2, $3)`, h[:], bl.rec, bl.refs)
			checks = append(checks, pgCheck{"insert blob " + h.String(), false})
		case bl.existed && bl.refs == 0:
			b.Queue(`DELETE FROM ctx_blobs WHERE hash = $1 AND refs = $2`, h[:], bl.refs0)
			checks = append(checks, pgCheck{"delete blob " + h.String(), true})
		case bl.existed && bl.refs0 == 0:
			// A blob left with no references (never by this store,
			// which deletes them) gets its record back.
			b.Queue(`UPDATE ctx_blobs SET rec = $2, refs = $3 WHERE hash = $1 AND refs = $4`, h[:], bl.rec, bl.refs, bl.refs0)
			checks = append(checks, pgCheck{"update blob " + h.String(), true})
		case bl.existed && bl.refs != bl.refs0:
			b.Queue(`UPDATE ctx_blobs SET refs = $2 WHERE hash = $1 AND refs = $3`, h[:], bl.refs, bl.refs0)
			checks = append(checks, pgCheck{"update blob " + h.String(), true})
		}
	}
	for _, r := range g.newTurns {
		skips := make([]byte, 0, 16*len(r.Skips))
		for _, s := range r.Skips {
			skips = append(skips, s[:]...)
		}
		b.Queue(`INSERT INTO ctx_turns (id, parent, depth, type_tag, codec, hash, flags, created_ms, skips)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			r.ID[:], r.Parent[:], int64(r.Depth), int64(r.TypeTag), int64(r.Codec), r.PayloadHash[:],
			int64(r.Flags), r.CreatedAt.UnixMilli(), skips)
		checks = append(checks, pgCheck{"insert turn " + r.ID.String(), false})
	}
	for _, id := range g.newBranches {
		ph := g.heads[id]
		h := ph.head
		b.Queue(`INSERT INTO ctx_heads (branch, turn, depth, base, created_ms, seq) VALUES ($1, $2, $3, $4, $5, $6)`,
			id[:], h.Node[:], int64(h.Depth), h.Base[:], h.CreatedAt.UnixMilli(), ph.moves)
		checks = append(checks, pgCheck{"insert head " + id.String(), false})
	}
	checks = g.queueTenants(b, checks)
	for id, ph := range g.heads {
		if !ph.existed || ph.moves == 0 {
			continue
		}
		h := ph.head
		b.Queue(`UPDATE ctx_heads SET turn = $2, depth = $3, seq = $4 WHERE branch = $1 AND seq = $5`,
			id[:], h.Node[:], int64(h.Depth), ph.seq+ph.moves, ph.seq)
		checks = append(checks, pgCheck{"move head " + id.String(), true})
	}
	for _, o := range g.newOvs {
		b.Queue(`INSERT INTO ctx_overlays (seq, turn, tombstone, hash, purged, created_ms) VALUES ($1, $2, $3, $4, $5, $6)`,
			int64(o.Seq), o.Node[:], o.Tombstone, o.Hash[:], o.Purged[:], o.CreatedAt.UnixMilli())
		checks = append(checks, pgCheck{fmt.Sprintf("insert overlay %d", o.Seq), false})
	}
	if g.ovRead && g.ovSeq != uint64(g.ovSeq0) {
		b.Queue(`UPDATE ctx_counters SET value = $1 WHERE name = 'overlay_seq' AND value = $2`, int64(g.ovSeq), g.ovSeq0)
		checks = append(checks, pgCheck{"advance overlay seq", true})
	}
	if g.rows != nil {
		checks = g.rows.queue(b, checks)
	}
	if len(checks) == 0 {
		return nil
	}
	g.wrote = true
	br := g.tx.SendBatch(g.ctx, b)
	for _, c := range checks {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return fmt.Errorf("postgres: %s: %w", c.what, err)
		}
		if c.cas && tag.RowsAffected() != 1 {
			br.Close()
			return fmt.Errorf("%s: %w", c.what, errCASLost)
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("postgres: write group: %w", err)
	}
	return nil
}

// ---- reads ----

// readRecord reads a turn with its skip pointers (no overlay applied).
func (s *pgStore) readRecord(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, id messages.NodeID) (persistence.NodeRecord, error) {
	if err := persistence.CheckNodeID(id); err != nil {
		return persistence.NodeRecord{}, err
	}
	var parent, hash, skips []byte
	var depth, typeTag, codec, flags, created int64
	err := q.QueryRow(ctx, `SELECT parent, depth, type_tag, codec, hash, flags, created_ms, skips
		FROM ctx_turns WHERE id = $1`, id[:]).Scan(&parent, &depth, &typeTag, &codec, &hash, &flags, &created, &skips)
	if errors.Is(err, pgx.ErrNoRows) {
		return persistence.NodeRecord{}, persistence.NodeNotFound(id)
	}
	if err != nil {
		return persistence.NodeRecord{}, fmt.Errorf("postgres: read turn %s: %w", id, err)
	}
	t, err := pgTurnRow(id[:], parent, depth, typeTag, codec, hash, flags, created)
	if err != nil {
		return persistence.NodeRecord{}, err
	}
	r := persistence.NodeRecord{Node: t}
	if len(skips)%16 != 0 || len(skips)/16 != persistence.SkipLevels(t.Depth) {
		return persistence.NodeRecord{}, fmt.Errorf("%w: turn %s: %d bytes of skip pointers at depth %d", persistence.ErrCorrupt, id, len(skips), t.Depth)
	}
	for i := 0; i < len(skips); i += 16 {
		r.Skips = append(r.Skips, messages.NodeID(skips[i:i+16]))
	}
	s.turns.Put(r)
	return r, nil
}

func pgTurnRow(id, parent []byte, depth, typeTag, codec int64, hash []byte, flags, created int64) (persistence.Node, error) {
	var t persistence.Node
	if len(id) != 16 || len(parent) != 16 || len(hash) != 32 || depth < 0 ||
		codec < 0 || codec > math.MaxUint32 || flags < 0 || flags > math.MaxUint32 {
		return t, fmt.Errorf("%w: turn row %x", persistence.ErrCorrupt, id)
	}
	copy(t.ID[:], id)
	copy(t.Parent[:], parent)
	copy(t.PayloadHash[:], hash)
	t.Depth, t.TypeTag, t.Codec, t.Flags = uint64(depth), uint64(typeTag), uint32(codec), uint32(flags)
	t.CreatedAt = time.UnixMilli(created)
	return t, nil
}

// pgWalkSQL returns up to $2 turns from $1 towards the root, newest first,
// each with the latest overlay of seq <= $3 (or NULLs).
const pgWalkSQL = `WITH RECURSIVE w (id, parent, depth, type_tag, codec, hash, flags, created_ms, n) AS (
	SELECT id, parent, depth, type_tag, codec, hash, flags, created_ms, CAST(1 AS BIGINT)
	FROM ctx_turns WHERE id = $1
	UNION ALL
	SELECT t.id, t.parent, t.depth, t.type_tag, t.codec, t.hash, t.flags, t.created_ms, w.n + 1
	FROM ctx_turns t JOIN w ON t.id = w.parent WHERE w.n < $2
)
SELECT w.id, w.parent, w.depth, w.type_tag, w.codec, w.hash, w.flags, w.created_ms, o.seq, o.tombstone, o.hash
FROM w
LEFT JOIN (SELECT turn, max(seq) AS seq FROM ctx_overlays
	WHERE seq <= $3 AND turn IN (SELECT id FROM w) GROUP BY turn) m ON m.turn = w.id
LEFT JOIN ctx_overlays o ON o.seq = m.seq
ORDER BY w.depth DESC`

func (s *pgStore) AsOf(seq uint64) persistence.Reader { return s.reader(min(seq, math.MaxInt64)) }

func (s *pgStore) view() pgReader { return s.reader(math.MaxInt64) }

func (s *pgStore) reader(asOf uint64) pgReader {
	r := pgReader{s: s, asOf: asOf}
	r.Pager.View = func(ctx context.Context, fn func(persistence.DAGView) error) error {
		if err := s.alive(); err != nil {
			return err
		}
		return fn(pgView{r, ctx})
	}
	return r
}

// pgReader reads with the overlays of seq <= asOf applied.
type pgReader struct {
	persistence.Pager
	s    *pgStore
	asOf uint64
}

// pgView is a pgReader's DAGView: each of its reads is one statement,
// and a walk checks that the turns it read form a chain.
type pgView struct {
	r   pgReader
	ctx context.Context
}

func (v pgView) Head(b messages.BranchID) (persistence.Head, error) { return v.r.head(v.ctx, b) }

func (v pgView) Walk(id messages.NodeID, n int) ([]persistence.Node, messages.NodeID, error) {
	return v.r.walk(v.ctx, id, n)
}

func (v pgView) AncestorAt(id messages.NodeID, d, target uint64) (messages.NodeID, error) {
	return v.r.s.ancestorAt(v.ctx, id, d, target)
}

// walk returns up to n turns from id towards the root, newest first, and
// the id where it stopped (zero at the root).
func (r pgReader) walk(ctx context.Context, id messages.NodeID, n int) ([]persistence.Node, messages.NodeID, error) {
	if n <= 0 || id.IsZero() {
		return nil, id, nil
	}
	rows, err := r.s.pool.Query(ctx, pgWalkSQL, id[:], int64(n), int64(r.asOf))
	if err != nil {
		return nil, id, r.s.readErr("walk turns", err)
	}
	defer rows.Close()
	out := make([]persistence.Node, 0, min(n, 256))
	for rows.Next() {
		var tid, parent, hash, ovHash []byte
		var depth, typeTag, codec, flags, created int64
		var ovSeq *int64
		var ovTomb *bool
		if err := rows.Scan(&tid, &parent, &depth, &typeTag, &codec, &hash, &flags, &created, &ovSeq, &ovTomb, &ovHash); err != nil {
			return nil, id, r.s.readErr("walk turns", err)
		}
		t, err := pgTurnRow(tid, parent, depth, typeTag, codec, hash, flags, created)
		if err != nil {
			return nil, id, err
		}
		if ovSeq != nil {
			o := persistence.Overlay{Node: t.ID, Seq: uint64(*ovSeq), Tombstone: ovTomb != nil && *ovTomb}
			if len(ovHash) != 32 {
				return nil, id, fmt.Errorf("%w: overlay row %d", persistence.ErrCorrupt, *ovSeq)
			}
			copy(o.Hash[:], ovHash)
			t = persistence.ApplyOverlay(t, o)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, id, r.s.readErr("walk turns", err)
	}
	// Check the chain: each turn the parent of the one before, from id.
	next := id
	for i, t := range out {
		if t.ID != next {
			return nil, id, fmt.Errorf("%w: turn chain from %s broken at %d", persistence.ErrCorrupt, id, i)
		}
		next = t.Parent
	}
	if len(out) == 0 {
		return nil, id, persistence.NodeNotFound(id)
	}
	if len(out) < n && !next.IsZero() {
		return nil, id, fmt.Errorf("%w: turn %s names parent %s, which is missing", persistence.ErrCorrupt, out[len(out)-1].ID, next)
	}
	return out, next, nil
}

func (r pgReader) head(ctx context.Context, b messages.BranchID) (persistence.Head, error) {
	if err := persistence.CheckBranchID(b); err != nil {
		return persistence.Head{}, err
	}
	if err := r.s.alive(); err != nil {
		return persistence.Head{}, err
	}
	var turn, base []byte
	var depth, created int64
	err := r.s.pool.QueryRow(ctx, `SELECT turn, depth, base, created_ms FROM ctx_heads WHERE branch = $1`, b[:]).
		Scan(&turn, &depth, &base, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return persistence.Head{}, persistence.BranchNotFound(b)
	}
	if err != nil {
		return persistence.Head{}, r.s.readErr("read head of branch "+b.String(), err)
	}
	return pgHeadRow(b[:], turn, depth, base, created)
}

func (r pgReader) Head(ctx context.Context, b messages.BranchID) (persistence.Head, error) {
	return r.head(ctx, b)
}

func (r pgReader) Node(ctx context.Context, id messages.NodeID) (persistence.Node, error) {
	if err := persistence.CheckNodeID(id); err != nil {
		return persistence.Node{}, err
	}
	if err := r.s.alive(); err != nil {
		return persistence.Node{}, err
	}
	ts, _, err := r.walk(ctx, id, 1)
	if err != nil {
		return persistence.Node{}, err
	}
	return ts[0], nil
}

func (r pgReader) Blob(ctx context.Context, h persistence.Hash) ([]byte, error) {
	if err := r.s.alive(); err != nil {
		return nil, err
	}
	var rec []byte
	err := r.s.pool.QueryRow(ctx, `SELECT rec FROM ctx_blobs WHERE hash = $1 AND refs > 0`, h[:]).Scan(&rec)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, persistence.BlobNotFound(h)
	}
	if err != nil {
		return nil, r.s.readErr("read blob "+h.String(), err)
	}
	return persistence.DecodeBlob(h, rec, r.s.opts.Limits.MaxPayloadBytes)
}

// ancestorAt returns the ancestor of id (at depth d) at depth target,
// following skip pointers: O(log d) turn loads, most from the cache.
func (s *pgStore) ancestorAt(ctx context.Context, id messages.NodeID, d, target uint64) (messages.NodeID, error) {
	for d > target {
		rec, ok := s.turns.Get(id)
		if !ok {
			var err error
			if rec, err = s.readRecord(ctx, s.pool, id); err != nil {
				return id, s.readErr("find ancestor", err)
			}
		}
		if k := persistence.NextHop(d, target); k == 0 {
			id, d = rec.Parent, d-1
		} else {
			id, d = rec.Skips[k-1], d-uint64(1)<<k
		}
	}
	return id, nil
}

func (s *pgStore) Head(ctx context.Context, b messages.BranchID) (persistence.Head, error) {
	return s.view().Head(ctx, b)
}
func (s *pgStore) Node(ctx context.Context, id messages.NodeID) (persistence.Node, error) {
	return s.view().Node(ctx, id)
}
func (s *pgStore) Blob(ctx context.Context, h persistence.Hash) ([]byte, error) {
	return s.view().Blob(ctx, h)
}
func (s *pgStore) Last(ctx context.Context, b messages.BranchID, n int) (persistence.Page, error) {
	return s.view().Last(ctx, b, n)
}
func (s *pgStore) Before(ctx context.Context, id messages.NodeID, n int) (persistence.Page, error) {
	return s.view().Before(ctx, id, n)
}
func (s *pgStore) Chain(ctx context.Context, id messages.NodeID) ([]persistence.Node, error) {
	return s.view().Chain(ctx, id)
}
func (s *pgStore) Range(ctx context.Context, b messages.BranchID, start uint64, limit int) (persistence.RangePage, error) {
	return s.view().Range(ctx, b, start, limit)
}

// exists checks that turn id exists.
func (s *pgStore) exists(ctx context.Context, id messages.NodeID) error {
	if err := persistence.CheckNodeID(id); err != nil {
		return err
	}
	if err := s.alive(); err != nil {
		return err
	}
	if _, ok := s.turns.Get(id); ok {
		return nil
	}
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM ctx_turns WHERE id = $1`, id[:]).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return persistence.NodeNotFound(id)
	}
	return s.readErr("read turn "+id.String(), err)
}

func (s *pgStore) Children(ctx context.Context, id messages.NodeID) ([]messages.NodeID, error) {
	if err := s.exists(ctx, id); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT id FROM ctx_turns WHERE parent = $1 ORDER BY id`, id[:])
	if err != nil {
		return nil, s.readErr("read children of "+id.String(), err)
	}
	var out []messages.NodeID
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return nil, s.readErr("read children of "+id.String(), err)
		}
		c, err := messages.IDFromBytes[messages.NodeID](b)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("%w: child of %s: %v", persistence.ErrCorrupt, id, err)
		}
		out = append(out, c)
	}
	return out, s.readErr("read children of "+id.String(), rows.Err())
}

func (s *pgStore) Overlays(ctx context.Context, turn messages.NodeID) ([]persistence.Overlay, error) {
	if err := s.exists(ctx, turn); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, turn, tombstone, hash, purged, created_ms FROM ctx_overlays
		WHERE turn = $1 ORDER BY seq`, turn[:])
	if err != nil {
		return nil, s.readErr("read overlays of "+turn.String(), err)
	}
	defer rows.Close()
	var out []persistence.Overlay
	for rows.Next() {
		o, err := scanOverlay(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, s.readErr("read overlays of "+turn.String(), rows.Err())
}

func (s *pgStore) OverlaySeq(ctx context.Context) (uint64, error) {
	if err := s.alive(); err != nil {
		return 0, err
	}
	var v int64
	err := s.pool.QueryRow(ctx, `SELECT value FROM ctx_counters WHERE name = 'overlay_seq'`).Scan(&v)
	return uint64(v), s.readErr("read overlay seq", err)
}

func (s *pgStore) BlobRefs(ctx context.Context, h persistence.Hash) (uint64, error) {
	if err := s.alive(); err != nil {
		return 0, err
	}
	var v int64
	err := s.pool.QueryRow(ctx, `SELECT refs FROM ctx_blobs WHERE hash = $1`, h[:]).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return uint64(v), s.readErr("read refs of blob "+h.String(), err)
}

var _ persistence.Store = (*pgStore)(nil)
