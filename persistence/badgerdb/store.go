package badgerdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/commit"
)

// Options configure a Badger-backed store.
type Options struct {
	Dir        string
	Durability persistence.Durability
	Limits     persistence.Limits
	Compress   persistence.Compression
	// TableCompression is how Badger compresses the blocks of the
	// tables it writes (each table records its own: a store keeps
	// reading the tables an earlier setting wrote). S2 (Badger's
	// Snappy): table building, in flushes and compactions, is most of
	// the CPU of a long write (an import) once the data outgrows the
	// memtables, and S2 costs a fraction of zstd's for about a fifth
	// more disk (docs/BENCHMARKS.md, "Imports").
	TableCompression persistence.Compression
	// GroupCommitMax bounds the writes in one group commit.
	GroupCommitMax int
	// ValueThreshold: values at least this long go to Badger's value log,
	// shorter ones stay in the LSM tree.
	ValueThreshold   int64
	MemTableSize     int64
	BlockCacheSize   int64
	ValueLogFileSize int64
	// NodeCacheEntries bounds the cache of decoded turns (0 disables it).
	NodeCacheEntries int
	// BlobCacheBytes bounds the cache of decompressed payloads (0 disables it).
	BlobCacheBytes int64
	// RedoLogBytes is the size of the redo log (see redo.go), which a
	// DurabilitySync store syncs instead of Badger's logs; 0 goes without
	// it, syncing Badger's logs after each group.
	RedoLogBytes int64
	// MinFreeBytes is the free space the store keeps on its file system
	// (see space.go): under it new work is refused (CheckSpace), under
	// half of it every write; 0 disables the check.
	MinFreeBytes int64
	// GCInterval is the period of value-log GC; 0 disables it.
	GCInterval     time.Duration
	GCDiscardRatio float64
	// EncryptionKey, when set, encrypts the store at rest (cipher.go):
	// Badger's files, the redo log and, through Cipher, the stream
	// journals. 16, 24 or 32 bytes. A store is encrypted or not from its
	// creation: opening it the other way, or with another key, is an error.
	EncryptionKey []byte
	// EncryptionKeyRotation is how long Badger uses a data key before it
	// makes a new one (0: Badger's default, 10 days).
	EncryptionKeyRotation time.Duration
	// IndexCacheBytes bounds the memory for the indexes of Badger's
	// tables when the store is encrypted (Badger then decrypts an index
	// on each use that is not cached).
	IndexCacheBytes int64
	Logger          zerolog.Logger
	// Now is the clock for created_at stamps and ids (default time.Now).
	Now func() time.Time
}

// DefaultOptions returns the options a server uses for a data directory.
func DefaultOptions(dir string) Options {
	return Options{
		Dir:              dir,
		Durability:       persistence.DurabilitySync,
		Limits:           persistence.Limits{MaxPayloadBytes: persistence.DefaultMaxPayloadBytes},
		Compress:         persistence.CompressZstd,
		TableCompression: persistence.CompressS2,
		GroupCommitMax:   512,
		ValueThreshold:   64 << 10,
		MemTableSize:     32 << 20,
		BlockCacheSize:   256 << 20,
		ValueLogFileSize: 256 << 20,
		NodeCacheEntries: 1 << 18,
		BlobCacheBytes:   64 << 20,
		RedoLogBytes:     64 << 20,
		MinFreeBytes:     512 << 20,
		GCInterval:       10 * time.Minute,
		GCDiscardRatio:   0.5,
		IndexCacheBytes:  64 << 20,
		Logger:           zerolog.Nop(),
	}
}

// TestOptions returns DefaultOptions with small memory and file sizes, so
// that tests can open many stores without reserving gigabytes.
func TestOptions(dir string) Options {
	o := DefaultOptions(dir)
	o.MemTableSize = 4 << 20
	o.BlockCacheSize = 4 << 20
	o.ValueLogFileSize = 16 << 20
	o.NodeCacheEntries = 4096
	o.BlobCacheBytes = 1 << 20
	o.RedoLogBytes = 1 << 20
	o.IndexCacheBytes = 4 << 20
	o.GCInterval = 0
	return o
}

// badgerStore implements Store on one Badger database in managed-
// timestamp mode. A single committer goroutine performs every write, in
// groups: each group is one Badger transaction (or, too big for one, a
// write batch) at a fresh timestamp,
// synced before any writer in it is acknowledged. Readers read at the
// timestamp of the last completed group, so they never see a write that is
// not yet durable.
type badgerStore struct {
	// db is read by the writer, and by every other goroutine inside the
	// gate (or with gcMu held): a purge closes and opens it again
	// (reopen.go). nil once a reopen failed.
	db         *badger.DB
	gate       readGate
	badgerOpts badger.Options
	opts       Options
	log        zerolog.Logger

	readTs atomic.Uint64 // timestamp of the last durable group
	turns  *persistence.NodeCache
	blobs  *blobCache

	overlayMu sync.RWMutex
	overlays  map[messages.NodeID][]persistence.Overlay // every overlay; they are rare
	latest    *badgerReader                             // the reader with every overlay: the store's own

	ops    *commit.Queue[*op]
	done   chan struct{} // closed when the committer exits
	failed atomic.Pointer[error]
	stopGC chan struct{}
	gcDone chan struct{}
	stats  commit.Counters
	lastTs uint64 // committer only
	ovSeq  uint64 // committer only: last overlay seq

	// With DurabilitySync, the logs a group wrote are synced by the store,
	// not by Badger (see logTail): at checkpoints of the redo log, or after
	// each group without one.
	syncMu sync.Mutex // the writer and value-log GC both sync
	// gcMu keeps value-log GC and a purge's drop (purge.go), which blocks
	// Badger's writes, apart.
	gcMu     sync.Mutex
	walTail  *logTail
	vlogTail *logTail
	redo     *redoLog            // writer only, after open
	cipher   *persistence.Cipher // nil: not encrypted

	space *spaceGuard // nil: no check of free space
}

// OpenBadger opens (creating if needed) the store in opts.Dir.
func OpenBadger(opts Options) (persistence.Store, error) {
	return openBadger(opts)
}

func openBadger(opts Options) (*badgerStore, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("%w: store directory is empty", persistence.ErrInvalidArgument)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.GroupCommitMax <= 0 {
		opts.GroupCommitMax = 1
	}
	if opts.Limits.MaxPayloadBytes <= 0 {
		opts.Limits.MaxPayloadBytes = persistence.DefaultMaxPayloadBytes
	}
	if opts.ValueLogFileSize < opts.Limits.MaxPayloadBytes+64<<10 {
		return nil, fmt.Errorf("%w: value log file size %d must be at least the payload limit %d + 64 KiB",
			persistence.ErrInvalidArgument, opts.ValueLogFileSize, opts.Limits.MaxPayloadBytes)
	}
	if opts.MinFreeBytes < 0 {
		return nil, fmt.Errorf("%w: min free bytes %d is negative", persistence.ErrInvalidArgument, opts.MinFreeBytes)
	}
	if opts.MinFreeBytes > 0 {
		// Opening writes (Badger's files, the redo log applied again),
		// and Badger writes through memory maps: see space.go.
		if err := newSpaceGuard(opts.Dir, opts.MinFreeBytes).floor(); err != nil {
			return nil, fmt.Errorf("open store %s: cannot start: %w", opts.Dir, err)
		}
	}
	var ciph *persistence.Cipher
	if len(opts.EncryptionKey) > 0 {
		var err error
		if ciph, err = persistence.NewCipher(opts.EncryptionKey); err != nil {
			return nil, fmt.Errorf("open store %s: %w", opts.Dir, err)
		}
		if opts.IndexCacheBytes <= 0 {
			return nil, fmt.Errorf("%w: index cache of %d bytes: an encrypted store needs one", persistence.ErrInvalidArgument, opts.IndexCacheBytes)
		}
	}
	if err := checkEncryption(opts.Dir, ciph); err != nil {
		return nil, fmt.Errorf("open store %s: %w", opts.Dir, err)
	}
	opts.EncryptionKey = nil // the store keeps only the keys derived from it
	bo := badger.DefaultOptions(opts.Dir).
		WithLogger(badgerLogger{opts.Logger}).
		WithSyncWrites(false). // the store syncs what each group wrote; see logTail
		WithDetectConflicts(false).
		WithValueThreshold(opts.ValueThreshold).
		WithMemTableSize(opts.MemTableSize).
		WithBlockCacheSize(opts.BlockCacheSize).
		WithValueLogFileSize(opts.ValueLogFileSize).
		WithCompression(tableCompression(opts.TableCompression)).
		WithNumVersionsToKeep(1).
		WithMetricsEnabled(false).
		WithNumCompactors(2).
		WithNumMemtables(3)
	if ciph != nil {
		bo = bo.WithEncryptionKey(ciph.StoreKey()).WithIndexCacheSize(opts.IndexCacheBytes)
		if opts.EncryptionKeyRotation > 0 {
			bo = bo.WithEncryptionKeyRotationDuration(opts.EncryptionKeyRotation)
		}
	}
	if err := repairBeforeOpen(opts.Dir, opts.Logger); err != nil {
		return nil, fmt.Errorf("open store %s: %w", opts.Dir, err)
	}
	db, err := badger.OpenManaged(bo)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("open store %s: %w", opts.Dir, persistence.ErrLocked)
		}
		if errors.Is(err, badger.ErrEncryptionKeyMismatch) {
			return nil, fmt.Errorf("open store %s: %w: the store was encrypted with another key; "+
				"give the key it was created with (a lost key cannot be recovered)", opts.Dir, persistence.ErrWrongKey)
		}
		return nil, fmt.Errorf("open store %s: %w", opts.Dir, err)
	}
	s := &badgerStore{
		db:         db,
		badgerOpts: bo,
		opts:       opts,
		log:        opts.Logger,
		turns:      persistence.NewNodeCache(opts.NodeCacheEntries),
		blobs:      newBlobCache(opts.BlobCacheBytes),
		overlays:   make(map[messages.NodeID][]persistence.Overlay),
		ops:        commit.NewQueue[*op](4 * opts.GroupCommitMax),
		done:       make(chan struct{}),
		stopGC:     make(chan struct{}),
		gcDone:     make(chan struct{}),
		cipher:     ciph,
	}
	s.latest = s.reader(persistence.OverlayView{Latest: true})
	if opts.MinFreeBytes > 0 {
		s.space = newSpaceGuard(opts.Dir, opts.MinFreeBytes)
	}
	s.lastTs = db.MaxVersion()
	err = s.openTails()
	if err == nil {
		err = s.openRedo()
	}
	if err != nil {
		if s.redo != nil {
			s.redo.close()
		}
		s.closeTails()
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", opts.Dir, err)
	}
	s.readTs.Store(s.lastTs)
	if err := s.loadOverlays(); err != nil {
		s.closeTails()
		db.Close()
		return nil, err
	}
	if err := s.finishPurges(); err != nil {
		s.closeTails()
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", opts.Dir, err)
	}
	go s.commitLoop()
	go s.gcLoop()
	return s, nil
}

func (s *badgerStore) loadOverlays() error {
	txn := s.db.NewTransactionAt(s.lastTs, false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{tableOverlay}, PrefetchValues: true})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		k, err := decodeKey(it.Item().Key())
		if err != nil {
			return err
		}
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			return fmt.Errorf("load overlays: %w", err)
		}
		o, err := decodeOverlay(k.a, k.seq, v)
		if err != nil {
			return err
		}
		s.overlays[o.Node] = append(s.overlays[o.Node], o)
		s.ovSeq = max(s.ovSeq, o.Seq)
	}
	return nil
}

// Close stops accepting writes, lets those already submitted finish, and
// closes the database.
func (s *badgerStore) Close() error {
	if !s.ops.Close() {
		return nil
	}
	<-s.done
	close(s.stopGC)
	<-s.gcDone
	if s.space != nil {
		if err := s.space.check(max(s.opts.MinFreeBytes/2, s.opts.MemTableSize+1<<20)); err != nil {
			// Badger writes its memtable into a new table at close,
			// through a memory map: with no room for it, a SIGBUS.
			// Everything written is in the logs, synced here, which the
			// next open replays: Badger is left as a crash leaves it (in
			// this process, its directory stays locked).
			err = errors.Join(fmt.Errorf("close store %s: Badger left unflushed: %w", s.opts.Dir, err), s.syncAllLogs())
			s.closeTails()
			s.log.Warn().Err(err).Msg("close")
			return err
		}
	}
	var err error
	if s.db != nil {
		err = s.db.Close()
	}
	s.closeTails()
	return err
}

// openTails finds the logs Badger writes, which a durable store syncs.
func (s *badgerStore) openTails() error {
	if s.opts.Durability != persistence.DurabilitySync {
		return nil
	}
	var err error
	s.walTail, s.vlogTail, err = openLogTails(s.opts.Dir)
	return err
}

func (s *badgerStore) closeTails() {
	for _, t := range []*logTail{s.walTail, s.vlogTail} {
		if t != nil {
			t.close()
		}
	}
	if s.redo != nil {
		s.redo.close()
		s.redo = nil
	}
}

// notApplied returns the entries of the redo log's group of ts that
// Badger does not hold at ts: a value written again would go into the
// value-log file Badger writes now while the first copy stays in an older
// one, where no discard count ever points a value-log GC at it (a hard
// delete would leave it on disk). Deletions are kept: they write no
// value, and whether one was applied cannot be read back.
func (s *badgerStore) notApplied(entries []entry, ts uint64) ([]entry, error) {
	txn := s.db.NewTransactionAt(ts, false)
	defer txn.Discard()
	out := entries[:0:0]
	for _, e := range entries {
		if !e.del {
			item, err := txn.Get(e.key)
			if err == nil && item.Version() == ts {
				continue // there already
			}
			if err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
				return nil, err
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// openRedo opens the redo log of a durable store, applies the groups of
// its last lap to Badger again (those a crash kept from Badger's synced
// logs, and others, which are written again as they were), makes them
// durable in Badger's logs, gives the log its size if it has another (a
// new log, or store.redo_log_bytes changed) and starts a lap. A store
// without a redo log (relaxed, or store.redo_log_bytes 0) applies the
// last lap of one it finds the same way, and then removes it: a lap left
// behind would be applied at a later open over what was written since.
func (s *badgerStore) openRedo() error {
	use := s.opts.Durability == persistence.DurabilitySync && s.opts.RedoLogBytes > 0
	path := filepath.Join(s.opts.Dir, redoFileName)
	if _, err := os.Stat(path); !use && errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	l, n, err := openRedo(s.opts.Dir, s.opts.RedoLogBytes, s.cipher, func(ts uint64, entries []entry) error {
		entries, err := s.notApplied(entries, ts)
		if err != nil {
			return fmt.Errorf("apply the group of ts %d: %w", ts, err)
		}
		if len(entries) == 0 {
			s.lastTs = max(s.lastTs, ts)
			return nil
		}
		if err := s.commitAt(entries, ts); err != nil {
			return fmt.Errorf("apply the group of ts %d: %w", ts, err)
		}
		s.lastTs = max(s.lastTs, ts)
		return nil
	})
	if err != nil {
		return err
	}
	s.redo = l
	if n > 0 {
		s.log.Info().Int("groups", n).Uint64("last_ts", s.lastTs).Msg("redo log applied")
	}
	if !use {
		// Badger's logs are not synced in these modes: sync them all once.
		wal, vlog, err := openLogTails(s.opts.Dir)
		if err == nil {
			err = errors.Join(wal.syncAll(), vlog.syncAll())
			wal.close()
			vlog.close()
		}
		if err != nil {
			return fmt.Errorf("redo log: %w", err)
		}
		l.close()
		s.redo = nil
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("redo log: %w", err)
		}
		return persistence.SyncDir(s.opts.Dir)
	}
	if err := s.syncLogs(true); err != nil {
		return err
	}
	if err := l.prepare(); err != nil {
		return err
	}
	return l.startLap()
}

// checkpoint makes every group written so far durable in Badger's logs and
// starts a lap of the redo log.
func (s *badgerStore) checkpoint() error {
	if err := s.syncLogs(true); err != nil {
		return err
	}
	return s.redo.startLap()
}

// syncLogs makes a written group durable: the value log first when the
// group put a value there (its pointers are in the WAL), then the WAL.
func (s *badgerStore) syncLogs(valueLog bool) error {
	if s.opts.Durability != persistence.DurabilitySync {
		return nil
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if valueLog {
		if err := s.vlogTail.sync(); err != nil {
			return err
		}
	}
	return s.walTail.sync()
}

func (s *badgerStore) Stats() persistence.Stats { return s.stats.Stats() }

// gcLoop runs value-log GC every GCInterval. Old versions become
// discardable one interval after they were superseded, so that no reader
// still holding an older timestamp loses them.
func (s *badgerStore) gcLoop() {
	defer close(s.gcDone)
	if s.opts.GCInterval <= 0 {
		return
	}
	t := time.NewTicker(s.opts.GCInterval)
	defer t.Stop()
	prev := s.readTs.Load()
	for {
		select {
		case <-s.stopGC:
			return
		case <-t.C:
			s.gcMu.Lock()
			if s.db != nil {
				s.db.SetDiscardTs(prev)
			}
			s.gcMu.Unlock()
			prev = s.readTs.Load()
			if err := s.space.admit(); err != nil {
				// GC writes the values it keeps before it frees a file.
				s.log.Warn().Err(err).Msg("value log gc skipped")
				continue
			}
			s.runValueLogGC()
		}
	}
}

// runValueLogGC rewrites value-log files that are mostly garbage. GC moves
// their live values into the memtables and then deletes the old file;
// Badger does not sync the moved values first, since SyncWrites is off, so
// an open iterator (Badger deletes no value-log file while one is open)
// holds the old files until the store has synced every log.
func (s *badgerStore) runValueLogGC() {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	if s.failed.Load() != nil {
		return
	}
	txn := s.db.NewTransactionAt(s.readTs.Load(), false)
	hold := txn.NewIterator(badger.IteratorOptions{})
	for range 16 {
		if err := s.db.RunValueLogGC(s.opts.GCDiscardRatio); err != nil {
			if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
				s.log.Warn().Err(err).Msg("value log gc")
			}
			break
		}
	}
	if err := s.syncAllLogs(); err != nil {
		// Keep the old files: leave the iterator open for good.
		err = fmt.Errorf("persistence: store failed, reopen it: value log gc: %w", err)
		s.failed.CompareAndSwap(nil, &err)
		s.log.Error().Err(err).Msg("value log gc")
		return
	}
	hold.Close() // deletes the rewritten files
	txn.Discard()
}

// syncAllLogs syncs every WAL and the value log, for value-log GC.
func (s *badgerStore) syncAllLogs() error {
	if s.opts.Durability != persistence.DurabilitySync {
		return nil
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if err := s.vlogTail.syncAll(); err != nil {
		return err
	}
	return s.walTail.syncAll()
}

// Compact makes every superseded version discardable, flattens the LSM
// tree and runs value-log GC. It is for measurements and maintenance, when
// no read is in flight.
func (s *badgerStore) Compact() error {
	s.gcMu.Lock()
	if err := s.alive(); err != nil {
		s.gcMu.Unlock()
		return fmt.Errorf("compact: %w", err)
	}
	s.db.SetDiscardTs(s.readTs.Load())
	err := s.db.Flatten(2)
	s.gcMu.Unlock()
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	s.runValueLogGC()
	return nil
}

// --- reads ---

func (s *badgerStore) view() *badgerReader { return s.latest }

func (s *badgerStore) AsOf(seq uint64) persistence.Reader {
	return s.reader(persistence.OverlayView{AsOf: seq})
}

func (s *badgerStore) reader(v persistence.OverlayView) *badgerReader {
	r := &badgerReader{s: s, view: v}
	r.Pager.View = func(_ context.Context, fn func(persistence.DAGView) error) error {
		return s.read(func(txn *badger.Txn) error { return fn(badgerView{r, txn}) })
	}
	return r
}

func (s *badgerStore) Head(ctx context.Context, b messages.BranchID) (persistence.Head, error) {
	return s.view().Head(ctx, b)
}
func (s *badgerStore) Node(ctx context.Context, id messages.NodeID) (persistence.Node, error) {
	return s.view().Node(ctx, id)
}
func (s *badgerStore) Blob(ctx context.Context, h persistence.Hash) ([]byte, error) {
	return s.view().Blob(ctx, h)
}
func (s *badgerStore) Last(ctx context.Context, b messages.BranchID, n int) (persistence.Page, error) {
	return s.view().Last(ctx, b, n)
}
func (s *badgerStore) Before(ctx context.Context, id messages.NodeID, n int) (persistence.Page, error) {
	return s.view().Before(ctx, id, n)
}
func (s *badgerStore) Chain(ctx context.Context, id messages.NodeID) ([]persistence.Node, error) {
	return s.view().Chain(ctx, id)
}
func (s *badgerStore) Range(ctx context.Context, b messages.BranchID, start uint64, limit int) (persistence.RangePage, error) {
	return s.view().Range(ctx, b, start, limit)
}

func (s *badgerStore) Children(ctx context.Context, id messages.NodeID) ([]messages.NodeID, error) {
	var out []messages.NodeID
	err := s.read(func(txn *badger.Txn) error {
		if _, err := s.turnRecord(txn, id); err != nil {
			return err
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: childPrefix(id)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k, err := decodeKey(it.Item().Key())
			if err != nil {
				return err
			}
			out = append(out, messages.NodeID(k.b))
		}
		return nil
	})
	return out, err
}

func (s *badgerStore) Overlays(ctx context.Context, turn messages.NodeID) ([]persistence.Overlay, error) {
	if err := s.read(func(txn *badger.Txn) error {
		_, err := s.turnRecord(txn, turn)
		return err
	}); err != nil {
		return nil, err
	}
	s.overlayMu.RLock()
	defer s.overlayMu.RUnlock()
	return append([]persistence.Overlay(nil), s.overlays[turn]...), nil
}

func (s *badgerStore) OverlaySeq(ctx context.Context) (uint64, error) {
	var seq uint64
	s.overlayMu.RLock()
	for _, os := range s.overlays {
		seq = max(seq, os[len(os)-1].Seq)
	}
	s.overlayMu.RUnlock()
	return seq, s.alive()
}

func (s *badgerStore) BlobRefs(ctx context.Context, h persistence.Hash) (uint64, error) {
	var n uint64
	err := s.read(func(txn *badger.Txn) error {
		var err error
		n, err = getRefs(txn, h)
		return err
	})
	return n, err
}

func (s *badgerStore) alive() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	if s.ops.Closed() {
		return persistence.ErrClosed
	}
	return nil
}

// read runs fn in a read transaction at the last durable timestamp.
func (s *badgerStore) read(fn func(*badger.Txn) error) error {
	s.gate.enter()
	defer s.gate.leave()
	if err := s.alive(); err != nil {
		return err
	}
	txn := s.db.NewTransactionAt(s.readTs.Load(), false)
	defer txn.Discard()
	return fn(txn)
}

func getHead(txn *badger.Txn, b messages.BranchID) (persistence.Head, error) {
	if err := persistence.CheckBranchID(b); err != nil {
		return persistence.Head{}, err
	}
	item, err := txn.Get(headKey(b))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return persistence.Head{}, persistence.BranchNotFound(b)
	}
	if err != nil {
		return persistence.Head{}, fmt.Errorf("read head of branch %s: %w", b, err)
	}
	var h persistence.Head
	err = item.Value(func(v []byte) error {
		h, err = decodeHead(b, v)
		return err
	})
	return h, err
}

func getRefs(txn *badger.Txn, h persistence.Hash) (uint64, error) {
	item, err := txn.Get(refsKey(h))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read refs of blob %s: %w", h, err)
	}
	var n uint64
	err = item.Value(func(v []byte) error {
		d := decoder{b: v}
		n = d.uvarint()
		return d.done()
	})
	return n, err
}

func hasKey(txn *badger.Txn, k []byte) (bool, error) {
	_, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// turnRecord loads a durable turn, from the cache when it is there.
func (s *badgerStore) turnRecord(txn *badger.Txn, id messages.NodeID) (persistence.NodeRecord, error) {
	if err := persistence.CheckNodeID(id); err != nil {
		return persistence.NodeRecord{}, err
	}
	if r, ok := s.turns.Get(id); ok {
		return r, nil
	}
	item, err := txn.Get(turnKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return persistence.NodeRecord{}, persistence.NodeNotFound(id)
	}
	if err != nil {
		return persistence.NodeRecord{}, fmt.Errorf("read turn %s: %w", id, err)
	}
	var r persistence.NodeRecord
	err = item.Value(func(v []byte) error {
		r, err = decodeTurn(id, v)
		return err
	})
	if err == nil {
		s.turns.Put(r)
	}
	return r, err
}

// badgerReader reads with one overlay policy: latest, or as of a seq.
type badgerReader struct {
	persistence.Pager
	s    *badgerStore
	view persistence.OverlayView
}

// present applies the reader's overlay policy to a stored turn.
func (r *badgerReader) present(t persistence.Node) persistence.Node {
	r.s.overlayMu.RLock()
	os := r.s.overlays[t.ID]
	r.s.overlayMu.RUnlock()
	return r.view.Apply(t, os)
}

func (r *badgerReader) Head(ctx context.Context, b messages.BranchID) (persistence.Head, error) {
	var h persistence.Head
	err := r.s.read(func(txn *badger.Txn) (err error) {
		h, err = getHead(txn, b)
		return err
	})
	return h, err
}

func (r *badgerReader) Node(ctx context.Context, id messages.NodeID) (persistence.Node, error) {
	var t persistence.Node
	err := r.s.read(func(txn *badger.Txn) error {
		rec, err := r.s.turnRecord(txn, id)
		t = r.present(rec.Node)
		return err
	})
	return t, err
}

func (r *badgerReader) Blob(ctx context.Context, h persistence.Hash) ([]byte, error) {
	if p, ok := r.s.blobs.get(h); ok {
		if err := r.s.alive(); err != nil {
			return nil, err
		}
		return p, nil
	}
	gen := r.s.blobs.gen.Load() // before the read's timestamp; see blobCache
	var p []byte
	err := r.s.read(func(txn *badger.Txn) error {
		item, err := txn.Get(blobKey(h))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return persistence.BlobNotFound(h)
		}
		if err != nil {
			return fmt.Errorf("read blob %s: %w", h, err)
		}
		return item.Value(func(v []byte) error {
			p, err = persistence.DecodeBlob(h, v, r.s.opts.Limits.MaxPayloadBytes)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	r.s.blobs.put(h, append([]byte(nil), p...), gen)
	return p, nil
}

// badgerView is a badgerReader's DAGView within one read transaction.
type badgerView struct {
	r   *badgerReader
	txn *badger.Txn
}

func (v badgerView) Head(b messages.BranchID) (persistence.Head, error) { return getHead(v.txn, b) }

// Walk reads the turns missing from the cache with one reverse iterator:
// a chain written by one writer lies in consecutive keys (ids grow with
// time), so each parent is usually the very next key; when it is not,
// the iterator seeks to it.
func (v badgerView) Walk(id messages.NodeID, n int) ([]persistence.Node, messages.NodeID, error) {
	var it *badger.Iterator
	defer func() {
		if it != nil {
			it.Close()
		}
	}()
	var out []persistence.Node
	for ; n > 0 && !id.IsZero(); n-- {
		rec, ok := v.r.s.turns.Get(id)
		if !ok {
			if it == nil {
				it = v.txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte{tableTurn}})
			}
			var err error
			if rec, err = v.r.s.iterTurn(it, id); err != nil {
				return nil, id, err
			}
		}
		if out == nil {
			out = make([]persistence.Node, 0, min(n, int(rec.Depth)+1))
		}
		out = append(out, v.r.present(rec.Node))
		id = rec.Parent
	}
	return out, id, nil
}

func (v badgerView) AncestorAt(id messages.NodeID, d, target uint64) (messages.NodeID, error) {
	return v.r.s.ancestorAt(v.txn, id, d, target)
}

// iterTurn reads turn id at the reverse iterator's position, seeking
// first unless the iterator is already there, and leaves the iterator on
// the next older key.
func (s *badgerStore) iterTurn(it *badger.Iterator, id messages.NodeID) (persistence.NodeRecord, error) {
	k := turnKey(id)
	if !it.Valid() || !bytes.Equal(it.Item().Key(), k) {
		it.Seek(k)
		if !it.Valid() || !bytes.Equal(it.Item().Key(), k) {
			return persistence.NodeRecord{}, persistence.NodeNotFound(id)
		}
	}
	var rec persistence.NodeRecord
	err := it.Item().Value(func(v []byte) error {
		var err error
		rec, err = decodeTurn(id, v)
		return err
	})
	if err != nil {
		return rec, err
	}
	s.turns.Put(rec)
	it.Next()
	return rec, nil
}

// ancestorAt returns the ancestor of id (at depth d) at depth target,
// following skip pointers: O(log d) turn loads.
func (s *badgerStore) ancestorAt(txn *badger.Txn, id messages.NodeID, d, target uint64) (messages.NodeID, error) {
	for d > target {
		rec, err := s.turnRecord(txn, id)
		if err != nil {
			return id, err
		}
		if k := persistence.NextHop(d, target); k == 0 {
			id, d = rec.Parent, d-1
		} else {
			id, d = rec.Skips[k-1], d-uint64(1)<<k
		}
	}
	return id, nil
}

// badgerLogger routes Badger's log lines to zerolog; its chatty info and
// debug lines go to debug.
type badgerLogger struct{ l zerolog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Error().Str("component", "badger").Msgf(f, a...)
}
func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn().Str("component", "badger").Msgf(f, a...)
}
func (b badgerLogger) Infof(f string, a ...any) { b.l.Debug().Str("component", "badger").Msgf(f, a...) }
func (b badgerLogger) Debugf(f string, a ...any) {
	b.l.Trace().Str("component", "badger").Msgf(f, a...)
}

// tableCompression is Badger's name of c.
func tableCompression(c persistence.Compression) options.CompressionType {
	switch c {
	case persistence.CompressNone:
		return options.None
	case persistence.CompressS2:
		return options.Snappy
	default:
		return options.ZSTD
	}
}
