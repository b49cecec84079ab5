package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// redoCRC is the checksum of a redo record (CRC-32C).
var redoCRC = crc32.MakeTable(crc32.Castagnoli)

// The redo log makes a durable group durable with one flush of data only.
//
// Badger's memtable WAL is a sparse file: a write that reaches a page of
// it for the first time allocates a block, and syncing it then commits the
// file system's journal as well as the data. On the dev VM's ext4 a 4 KB
// write and sync costs a p50 of 0.3–0.9 ms that way, against 0.2–0.4 ms
// into blocks written before (the two disk probes of ctxinf bench serve,
// fsync_4k and fdatasync_4k_overwrite; docs/BENCHMARKS.md). So the
// store keeps a log of its own, a file of fixed size written full of zeros
// once, which it overwrites in place from the start, lap after lap: each
// group's entries go into it as one record, and only it is synced before
// the group is acknowledged. Badger's logs are synced at a checkpoint,
// before a lap starts (then every record of the lap before is in Badger's
// synced logs or tables), and at open, after the records of the last lap
// have been applied to Badger again.
//
// A record is
//
//	magic u32 | payload length u32 | crc32c u32 | lap u64 | ts u64 | payload
//
// little-endian, the CRC over lap, ts and the payload. A lap begins with a
// record of ts 0, no payload and a random lap id; the records after it
// carry the same lap id and each a group's timestamp (increasing) and
// entries. Reading stops at the first record that is torn, of another lap
// or not newer: what follows is a lap before's, already checkpointed, or a
// write the crash cut short. A stale record is never applied: writing an
// old value again could bring back a key deleted since, once compaction
// has dropped the deletion.
//
// Applying a record of the last lap again is harmless: it writes the same
// values at the same versions as before, and the lap's later records
// follow it.
//
// With encryption (cipher.go) a record has the magic "REDX" and its
// payload is sealed: the key's id, a nonce and the entries sealed with
// AES-GCM under the lap's key, with lap and ts as additional data. The
// CRC covers the sealed bytes, so a torn record is found as before.

const (
	redoFileName        = "ctxinf.redo"
	redoMagic    uint32 = 0x4f444552 // "REDO"
	// redoMagicSealed starts the records of an encrypted log.
	redoMagicSealed uint32 = 0x58444552 // "REDX"
	redoHeader             = 4 + 4 + 4 + 8 + 8
	// redoZeroChunk is the size of the writes that fill a new log with zeros.
	redoZeroChunk = 1 << 20
)

// redoLog is the log's file; only the store's writer uses it.
type redoLog struct {
	f    *os.File
	size int64
	off  int64  // where the next record goes
	lap  uint64 // the lap's id
	buf  []byte

	c     *persistence.Cipher // nil: records are not encrypted
	aead  cipher.AEAD         // the lap's, with c
	plain []byte              // a record's entries before they are sealed
}

// openRedo opens dir's redo log, creating the file if it is missing, and
// calls apply for each group of its last lap, in order, as it reads them;
// it returns how many there were. The log is not written until prepare
// has given it size bytes (if it has another size) and startLap has begun
// a lap. With c, records are encrypted (nil: not); a log written under
// another key, or with and without encryption, is an error saying so.
func openRedo(dir string, size int64, c *persistence.Cipher, apply func(ts uint64, entries []entry) error) (*redoLog, int, error) {
	path := filepath.Join(dir, redoFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("redo log: %w", err)
	}
	l := &redoLog{f: f, size: size, c: c}
	st, err := f.Stat()
	n := 0
	if err == nil {
		n, err = l.read(st.Size(), apply)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("redo log %s: %w", path, err)
	}
	return l, n, nil
}

// prepare gives the log its size, full of zeros and synced, unless it has
// it already. The groups of its last lap must be durable elsewhere first.
// A log that cannot be given all its bytes (the file system is short of
// them) is an error naming it, its size and the free bytes, and is left
// empty, its blocks given back: a store must not start with a log smaller
// than it was asked for.
func (l *redoLog) prepare() error {
	st, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("redo log %s: %w", l.f.Name(), err)
	}
	if st.Size() == l.size {
		return nil
	}
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("redo log %s: %w", l.f.Name(), err)
	}
	free, ferr := freeBytes(filepath.Dir(l.f.Name()))
	if ferr == nil && free < l.size {
		return l.noSpace(free, nil)
	}
	if err := l.fill(); err != nil {
		_ = l.f.Truncate(0)
		if errors.Is(err, syscall.ENOSPC) {
			free, _ := freeBytes(filepath.Dir(l.f.Name()))
			return l.noSpace(free, err)
		}
		return fmt.Errorf("redo log %s: %w", l.f.Name(), err)
	}
	return nil
}

// noSpace is the error of a log that the file system has no room for.
func (l *redoLog) noSpace(free int64, cause error) error {
	err := fmt.Errorf("%w: redo log %s: cannot allocate its %d bytes (store.redo_log_bytes): its file system has %d bytes free; "+
		"free space or lower store.redo_log_bytes", persistence.ErrNoSpace, l.f.Name(), l.size, free)
	if cause != nil {
		err = fmt.Errorf("%w (%v)", err, cause)
	}
	return err
}

// fill writes the log full of zeros and syncs it and its directory.
func (l *redoLog) fill() error {
	zeros := make([]byte, min(l.size, redoZeroChunk))
	for off := int64(0); off < l.size; off += int64(len(zeros)) {
		if _, err := l.f.WriteAt(zeros[:min(int64(len(zeros)), l.size-off)], off); err != nil {
			return err
		}
	}
	if err := l.f.Sync(); err != nil {
		return err
	}
	return persistence.SyncDir(filepath.Dir(l.f.Name()))
}

// read calls apply for each group of the last lap of the log's first size
// bytes, reading one record at a time, and returns how many there were.
func (l *redoLog) read(size int64, apply func(ts uint64, entries []entry) error) (int, error) {
	var (
		head      = make([]byte, redoHeader)
		buf       []byte
		plain     []byte
		lap, last uint64
		n         int
		aead      cipher.AEAD
	)
	want, other := redoMagic, redoMagicSealed
	if l.c != nil {
		want, other = other, want
	}
	for off := int64(0); off+redoHeader <= size; {
		if _, err := l.f.ReadAt(head, off); err != nil {
			return n, err
		}
		plen := int64(binary.LittleEndian.Uint32(head[4:]))
		magic := binary.LittleEndian.Uint32(head)
		if magic != want && (off > 0 || magic != other) || plen > size-off-redoHeader {
			break
		}
		buf = append(append(buf[:0], head...), make([]byte, plen)...)
		if _, err := l.f.ReadAt(buf[redoHeader:], off+redoHeader); err != nil {
			return n, err
		}
		rlap, ts, payload, ok := decodeRedo(buf)
		if !ok || off == 0 && ts != 0 || off > 0 && (rlap != lap || ts <= last) {
			break
		}
		if magic != want {
			// The lap's first record, whole, of the other kind.
			if l.c == nil {
				return n, fmt.Errorf("%w: the redo log was written with encryption", persistence.ErrEncrypted)
			}
			return n, fmt.Errorf("%w: the redo log was written without encryption", persistence.ErrNotEncrypted)
		}
		if l.c != nil {
			var err error
			if off == 0 {
				if aead, err = l.c.RedoAEAD(rlap); err != nil {
					return n, err
				}
			}
			var ad [16]byte
			copy(ad[:], buf[12:redoHeader])
			if payload, err = l.c.Open(plain[:0], aead, payload, ad[:]); err != nil {
				if errors.Is(err, persistence.ErrWrongKey) {
					return n, fmt.Errorf("%w: the redo log was written under another key", persistence.ErrWrongKey)
				}
				// The CRC matched: not a torn write.
				return n, fmt.Errorf("%w: redo record of ts %d: %v", persistence.ErrCorrupt, ts, err)
			}
			plain = payload
		}
		if off == 0 {
			lap = rlap
		} else {
			entries, err := decodeRedoEntries(payload)
			if err != nil {
				// The CRC matched: not a torn write but a bug.
				return n, fmt.Errorf("%w: redo record of ts %d: %v", persistence.ErrCorrupt, ts, err)
			}
			if err := apply(ts, entries); err != nil {
				return n, err
			}
			n++
		}
		last, off = ts, off+redoHeader+plen
	}
	return n, nil
}

// decodeRedo decodes the record b, checking its magic (either), length
// and CRC.
func decodeRedo(b []byte) (lap, ts uint64, payload []byte, ok bool) {
	if len(b) < redoHeader || binary.LittleEndian.Uint32(b) != redoMagic && binary.LittleEndian.Uint32(b) != redoMagicSealed ||
		int64(binary.LittleEndian.Uint32(b[4:])) != int64(len(b)-redoHeader) {
		return 0, 0, nil, false
	}
	if crc32.Checksum(b[12:], redoCRC) != binary.LittleEndian.Uint32(b[8:]) {
		return 0, 0, nil, false
	}
	return binary.LittleEndian.Uint64(b[12:]), binary.LittleEndian.Uint64(b[20:]), b[redoHeader:], true
}

// A record's payload: per entry, a flag byte (1: deletion), the key's
// length and the key, the value's length and the value (uvarints).
func decodeRedoEntries(p []byte) ([]entry, error) {
	var out []entry
	for len(p) > 0 {
		del := p[0] == 1
		p = p[1:]
		k, rest, err := redoBytes(p)
		if err != nil {
			return nil, err
		}
		v, rest, err := redoBytes(rest)
		if err != nil {
			return nil, err
		}
		p = rest
		e := entry{key: k, del: del}
		if !del {
			e.val = v
		}
		out = append(out, e)
	}
	return out, nil
}

func redoBytes(p []byte) (b, rest []byte, err error) {
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)-w) {
		return nil, nil, errors.New("bad length")
	}
	return p[w : w+int(n)], p[w+int(n):], nil
}

// encode builds a record of the lap in l.buf.
func (l *redoLog) encode(ts uint64, entries []entry) []byte {
	// The buffers are sized for the record at once: grown by append, a
	// group of a few MB allocated five times its size.
	n := int(recordMax(entries))
	b := append(slices.Grow(l.buf[:0], n), make([]byte, redoHeader)...)
	binary.LittleEndian.PutUint64(b[12:], l.lap)
	binary.LittleEndian.PutUint64(b[20:], ts)
	magic := redoMagic
	if l.c == nil {
		b = appendRedoEntries(b, entries)
	} else {
		var ad [16]byte
		copy(ad[:], b[12:redoHeader])
		l.plain = appendRedoEntries(slices.Grow(l.plain[:0], n), entries)
		b = l.c.Seal(b, l.aead, l.plain, ad[:])
		magic = redoMagicSealed
	}
	binary.LittleEndian.PutUint32(b, magic)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-redoHeader))
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b[12:], redoCRC))
	l.buf = b
	return b
}

// appendRedoEntries appends the payload of entries to b.
func appendRedoEntries(b []byte, entries []entry) []byte {
	for _, e := range entries {
		flag := byte(0)
		if e.del {
			flag = 1
		}
		b = append(b, flag)
		b = binary.AppendUvarint(b, uint64(len(e.key)))
		b = append(b, e.key...)
		b = binary.AppendUvarint(b, uint64(len(e.val)))
		b = append(b, e.val...)
	}
	return b
}

// startLap begins a lap, with a new id, at the start of the log, and
// syncs its first record. The caller has made every group of the lap
// before durable in Badger (a checkpoint); once the new lap's record is
// on disk, that lap is never read again.
func (l *redoLog) startLap() error {
	l.lap = rand.Uint64()
	if l.c != nil {
		var err error
		if l.aead, err = l.c.RedoAEAD(l.lap); err != nil {
			return fmt.Errorf("redo log: %w", err)
		}
	}
	rec := l.encode(0, nil)
	if _, err := l.f.WriteAt(rec, 0); err != nil {
		return fmt.Errorf("redo log: %w", err)
	}
	if err := l.sync(); err != nil {
		return fmt.Errorf("redo log: %w", err)
	}
	l.off = int64(len(rec))
	return nil
}

// wipe overwrites the whole log with zeros, synced, and starts a lap: for
// a hard delete (purge.go), once every record of the log is durable in
// Badger, so that no copy of what was deleted is left in it.
func (l *redoLog) wipe() error {
	if err := l.fill(); err != nil {
		return fmt.Errorf("redo log %s: %w", l.f.Name(), err)
	}
	return l.startLap()
}

// recordMax is an upper bound on the size of the record of entries
// (sealed or not).
func recordMax(entries []entry) int64 {
	n := int64(redoHeader + persistence.SealOverhead)
	for _, e := range entries {
		n += 1 + 2*binary.MaxVarintLen64 + int64(len(e.key)+len(e.val))
	}
	return n
}

// fits reports whether a group of n bytes (recordMax) is logged at all: a
// record takes at most a quarter of the log, so that a lap holds several.
func (l *redoLog) fits(n int64) bool { return n <= l.size/4 }

// full reports whether a group of n bytes needs a new lap first.
func (l *redoLog) full(n int64) bool { return l.off+n > l.size }

// append writes the record of the group ts (which fits and is not full)
// and does not sync it.
func (l *redoLog) append(ts uint64, entries []entry) error {
	rec := l.encode(ts, entries)
	if _, err := l.f.WriteAt(rec, l.off); err != nil {
		return fmt.Errorf("redo log: %w", err)
	}
	l.off += int64(len(rec))
	if cap(l.buf) > redoZeroChunk {
		l.buf, l.plain = nil, nil // a big group's buffers are not kept
	}
	return nil
}

// sync makes the records written so far durable.
func (l *redoLog) sync() error { return persistence.Fdatasync(l.f) }

func (l *redoLog) close() error { return l.f.Close() }
