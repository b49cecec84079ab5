// Package actors is the runtime's shell of protoactor-go actors: a root
// that supervises everything and activates branch actors on demand, the
// branch actors (one writer per branch, rebuilt by replay), and the step,
// journal, librarian and indexer actors they talk to. The decisions are
// internal/core's; actors translate messages and run effects.
package actors

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
	"github.com/contextinfinity/ctxinf/persistence/pgdb"
	"github.com/contextinfinity/ctxinf/supervision"
)

// Errors returned by the Runtime.
var (
	ErrBranchStopped = errors.New("actors: branch stopped after repeated failures")
	ErrTimeout       = errors.New("actors: request timed out")
	// ErrInterrupted: the branch failed (and restarts) while handling the
	// request. Nothing it acknowledged is lost; the request may be retried.
	ErrInterrupted = errors.New("actors: request interrupted")
)

// Runtime hosts branches as actors over one database.
type Runtime struct {
	cfg        Config
	db         persistence.Database
	purger     purger                // db, as deletes and the retention job use it
	dirLock    *os.File              // {DataDir}/postgres.lock, held while open (PostgreSQL only)
	actorLog   *persistence.ActorLog // the persistence provider of every branch
	sys        *actor.ActorSystem
	root       *actor.PID
	librarians []*actor.PID // a pool: a branch always uses the same one
	indexers   []*actor.PID
	log        zerolog.Logger
	sup        *supervision.Strategy // of the branch actors (under root)
	// The strategies of the other kinds: a step actor is stopped, never
	// restarted (that would call its provider again), and its turn ends
	// as interrupted; a journal actor restarts, its journal intact; a
	// librarian or indexer restarts, and the branch whose job it lost
	// asks again.
	stepSup, journalSup, librarianSup, indexerSup *supervision.Strategy
	kills                                         *supervision.KillSwitch

	streams  string                   // {DataDir}/streams
	journals persistence.JournalStore // the stream journals: the store's, or files in streams

	stopped stoppedBranches // branches supervision stopped, for a backoff

	gone terminations // per live branch actor, closed when it terminates
	// pids holds the branch actors root has activated (BranchID to
	// *actor.PID), so that asking a live one takes no round trip
	// through root. Root removes an actor's entry when it terminates:
	// a PID caches its process, which holds the actor, so an entry left
	// behind would keep a passivated branch's whole actor in memory.
	pids sync.Map
	// sessionOf remembers the sessions of the branches asked for lately,
	// for Placement (a branch never changes session); bounded, so that a
	// long-running member does not keep an entry for every branch it was
	// ever asked about.
	sessionOf genCache[messages.BranchID, messages.SessionID]

	mem *memory // retrieval: the embedder and the branches' indexes
	// memTools are the memory tools (memory_tools.go).
	memTools *ToolRegistry

	closeOnce sync.Once
	closing   chan struct{} // closed when Close begins
	// journalSyncs are the closing writes and fsyncs of finalized steps'
	// journals under way (finishJournal).
	journalSyncs sync.WaitGroup
	finishing    stepWaits // those of journalSyncs by step, which a delete waits for
	// deleted are the branches deleted or being deleted (delete.go):
	// never activated again.
	deletedMu sync.Mutex
	deleted   map[messages.BranchID]bool
	pruning   sync.WaitGroup // pruneLoop, retentionLoop
	// summaryDeadline and commitReask (jobs.go) are the waits after
	// which a summary asked for and not answered is asked again,
	// jobCheck the wait after which a branch looks whether a job it
	// waits for is still held by a worker (jobs), and retryBase and
	// retryMax the first and longest wait before a job lost or failed
	// more than maxLostJobs times in a row is asked again; tests set
	// them. dropSummaries and dropIndexes drop that many summary and
	// index requests unanswered, as a lost message would be (tests).
	summaryDeadline, commitReask, jobCheck, retryBase, retryMax time.Duration
	dropSummaries, dropIndexes                                  atomic.Int32
	// jobs are the requests sent to a worker that it has not finished.
	jobs heldJobs
	// manualFolds holds the branches whose commit (CommitPending) is
	// not finished: an instance that replaces one that stopped or failed
	// goes on with it.
	manualFolds sync.Map // messages.BranchID → struct{}
	// retentionMu runs one retention run at a time.
	retentionMu sync.Mutex
	closeErr    error

	keys keyLocks // requests under one idempotency key, one at a time (ClaimKey)

	counts    genCache[uint64, int] // token counts by a hash of model and text
	countSeed maphash.Seed

	// indexBacklog counts the turns the branches in memory folded and
	// have not indexed yet (IndexBacklog).
	indexBacklog atomic.Int64
}

// Open opens the runtime on cfg.DataDir: the database, the actor system,
// the root, librarian and indexer actors; then it reconciles unfinished
// work (SRD §6.5) before returning. It fails, before touching DataDir,
// when cfg leaves a required setting unset (Config).
func Open(ctx context.Context, cfg Config) (*Runtime, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	// Steps started from here on are this runtime's (ids hold
	// milliseconds).
	opened := cfg.Now().Truncate(time.Millisecond)
	db, lock, err := openDatabase(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	// An encrypted store's journals are encrypted too.
	cfg.Journal.Cipher = db.Cipher()
	cfg.Store.EncryptionKey = nil // the store keeps the keys it derived
	r := &Runtime{
		summaryDeadline: summaryDeadline,
		commitReask:     commitReask,
		jobCheck:        jobCheckEvery,
		retryBase:       retryBase,
		retryMax:        maxRetryWait,
		closing:         make(chan struct{}),
		cfg:             cfg,
		db:              db,
		purger:          db,
		dirLock:         lock,
		actorLog:        db.ActorLog(cfg.SnapshotEvery),
		log:             cfg.Logger,
		streams:         filepath.Join(cfg.DataDir, "streams"),
		deleted:         make(map[messages.BranchID]bool),
		mem:             newMemory(db, cfg.Embedder, *cfg.Rank),
		kills:           &supervision.KillSwitch{},
	}
	if cfg.Faults != nil {
		r.kills = &cfg.Faults.Kills
		cfg.Faults.Attach(r.kill)
	}
	r.memTools = newMemoryTools(r)
	r.journals = journalStore(r.db, r.streams)
	if _, shared := r.db.(journalKeeper); !shared {
		openJournals.Store(r.streams, r.journals)
	}
	r.actorLog.CheckSnapshots(checkSnapshot, r.badSnapshot)
	r.countSeed = maphash.MakeSeed()
	// Token counters may load their encodings on first use (o200k's
	// takes about 200 ms): load the default model's now, in the
	// background, rather than in the first turn or fold.
	go r.counter(r.model(""))("warm up")
	r.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	var rootRef *root // set once the root runs; Stopping and Defer run on its goroutine
	r.supervise(func(child *actor.PID) bool { return rootRef != nil && rootRef.stopping[child.Id] })
	rootProps := actor.PropsFromProducer(func() actor.Actor { rootRef = newRoot(r); return rootRef },
		actor.WithSupervisor(r.sup))
	if r.root, err = r.sys.Root.SpawnNamed(rootProps, "ctxinf"); err != nil {
		openJournals.CompareAndDelete(r.streams, r.journals)
		db.Close()
		if lock != nil {
			lock.Close()
		}
		return nil, err
	}
	// Summaries and chunking are CPU work: one worker of each per core.
	for i := range max(2, runtime.GOMAXPROCS(0)) {
		l, _ := r.sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &librarian{rt: r} },
			actor.WithGuardian(r.librarianSup)), fmt.Sprintf("librarian-%d", i))
		x, _ := r.sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &indexer{rt: r} },
			actor.WithGuardian(r.indexerSup)), fmt.Sprintf("indexer-%d", i))
		r.librarians, r.indexers = append(r.librarians, l), append(r.indexers, x)
	}
	if err := r.dropCutImports(ctx); err != nil {
		r.Close()
		return nil, fmt.Errorf("actors: %w", err)
	}
	if err := r.reconcile(ctx); err != nil {
		r.Close()
		return nil, err
	}
	if _, shared := r.db.(journalKeeper); !shared {
		// This process alone writes the journal files, and recovery gave
		// every interrupted step its row: a journal of a step started
		// before this open with no row is an orphan.
		n, err := r.RemoveOrphanJournals(ctx, opened)
		if err != nil {
			r.log.Warn().Err(err).Msg("remove orphan stream journals")
		} else if n > 0 {
			r.log.Info().Int("removed", n).Msg("removed the stream journals of steps with no row (deleted, or never accepted)")
		}
	}
	if cfg.RetainFinalized > 0 {
		r.pruning.Go(r.pruneLoop)
	}
	if cfg.Retention.Interval > 0 {
		r.pruning.Go(r.retentionLoop)
	}
	return r, nil
}

// openDatabase opens the runtime's store: PostgreSQL's when cfg.Postgres
// is set, else Badger's in {DataDir}/store.
//
// One runtime at a time uses a data directory: Badger locks its store's
// directory; for PostgreSQL the runtime locks {DataDir}/postgres.lock
// (returned, held until Close), so that a second process on the same data
// directory gets persistence.ErrLocked and asks the running server.
// Several runtimes on one database must be members of one cluster
// (Config.Placement, internal/cluster), which runs each session on one
// of them; runtimes on one database outside a cluster are not
// coordinated (their in-flight turns look crashed to each other).
func openDatabase(ctx context.Context, cfg *Config) (persistence.Database, *os.File, error) {
	if cfg.Postgres != nil {
		if len(cfg.Store.EncryptionKey) > 0 {
			return nil, nil, errors.New("actors: store.encryption is not supported with store.backend postgres: " +
				"the PostgreSQL store has no encryption at rest of its own; encrypt the database's storage instead")
		}
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, nil, err
		}
		// The lock Badger's directory gives a runtime on Badger, for one
		// on PostgreSQL, whose store has no local files: held by another
		// process, it is persistence.ErrLocked, so that the commands that
		// open the data directory ask its server instead.
		path := filepath.Join(cfg.DataDir, "postgres.lock")
		lock, err := persistence.Lock(path, true)
		if errors.Is(err, errors.ErrUnsupported) {
			lock, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) // no flock here: the file alone
		}
		if err != nil {
			return nil, nil, fmt.Errorf("actors: %w", err)
		}
		o := *cfg.Postgres
		o.Now = cfg.Now
		db, err := pgdb.OpenPostgresDB(ctx, o)
		if err != nil {
			lock.Close()
			return nil, nil, fmt.Errorf("actors: open the postgres store: %w", err)
		}
		return db, lock, nil
	}
	cfg.Store.Dir = filepath.Join(cfg.DataDir, "store")
	cfg.Store.Now = cfg.Now
	if err := os.MkdirAll(cfg.Store.Dir, 0o700); err != nil {
		return nil, nil, err
	}
	db, err := badgerdb.Open(cfg.Store)
	if err != nil {
		return nil, nil, err
	}
	return db, nil, nil
}

// Close stops every actor (branches finish the message in hand) and
// closes the database. Closing again does nothing and returns the same
// error.
func (r *Runtime) Close() error {
	r.closeOnce.Do(func() {
		close(r.closing)
		r.actorLog.StopWaiting() // a write waiting for free space gives up
		r.sys.Root.PoisonFuture(r.root).Wait()
		r.sys.Shutdown()
		r.mem.close()
		r.journalSyncs.Wait()
		r.pruning.Wait()
		openJournals.CompareAndDelete(r.streams, r.journals)
		jerr := closeJournals(r.journals)
		r.closeErr = r.db.Close()
		if r.closeErr == nil && jerr != nil {
			r.closeErr = fmt.Errorf("close stream journals: %w", jerr)
		}
		if r.dirLock != nil {
			r.dirLock.Close()
		}
	})
	return r.closeErr
}

// DB is the runtime's database (for reads: history, rows, blobs).
func (r *Runtime) DB() persistence.Database { return r.db }

// IndexBacklog returns how many turns the branches in memory folded into
// their summaries and have not indexed yet: their retrieval's backlog. A
// branch counts from its activation to its passivation, a restart
// counted once.
func (r *Runtime) IndexBacklog() int64 { return r.indexBacklog.Load() }
