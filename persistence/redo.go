package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// The redo log makes a durable group durable with one flush of data only.
//
// Badger's memtable WAL is a sparse file: a write that reaches a page of
// it for the first time allocates a block, and syncing it then commits the
// file system's journal as well as the data. On the dev VM's ext4 a 4 KB
// write and fdatasync costs a median 0.6–0.7 ms that way, against 0.2–0.35
// ms when the block was written before (see docs/BENCHMARKS.md). So the
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

const (
	redoFileName        = "ctxinf.redo"
	redoMagic    uint32 = 0x4f444552 // "REDO"
	redoHeader          = 4 + 4 + 4 + 8 + 8
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
}

// redoRecord is a group read back from the log.
type redoRecord struct {
	ts      uint64
	entries []entry
}

// openRedo opens dir's redo log, creating the file if it is missing, and
// returns the groups of its last lap, in order. The log is not written
// until prepare has given it size bytes (if it has another size) and
// startLap has begun a lap.
func openRedo(dir string, size int64) (*redoLog, []redoRecord, error) {
	path := filepath.Join(dir, redoFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("redo log: %w", err)
	}
	l := &redoLog{f: f, size: size}
	st, err := f.Stat()
	var recs []redoRecord
	if err == nil {
		recs, err = l.read(st.Size())
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("redo log %s: %w", path, err)
	}
	return l, recs, nil
}

// prepare gives the log its size, full of zeros and synced, unless it has
// it already. The groups of its last lap must be durable elsewhere first.
func (l *redoLog) prepare() error {
	st, err := l.f.Stat()
	if err == nil && st.Size() != l.size {
		if err = l.f.Truncate(0); err == nil {
			err = l.fill()
		}
	}
	if err != nil {
		return fmt.Errorf("redo log %s: %w", l.f.Name(), err)
	}
	return nil
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
	return syncDir(filepath.Dir(l.f.Name()))
}

// read returns the groups of the last lap of the log's first n bytes.
func (l *redoLog) read(n int64) ([]redoRecord, error) {
	data, err := io.ReadAll(io.NewSectionReader(l.f, 0, n))
	if err != nil {
		return nil, err
	}
	var recs []redoRecord
	var lap, last uint64
	for off := 0; ; {
		rlap, ts, payload, n, ok := decodeRedo(data[off:])
		if !ok || off == 0 && ts != 0 || off > 0 && (rlap != lap || ts <= last) {
			break
		}
		if off == 0 {
			lap = rlap
		} else {
			entries, err := decodeRedoEntries(payload)
			if err != nil {
				// The CRC matched: not a torn write but a bug.
				return nil, fmt.Errorf("%w: redo record of ts %d: %v", ErrCorrupt, ts, err)
			}
			recs = append(recs, redoRecord{ts: ts, entries: entries})
		}
		last, off = ts, off+n
	}
	return recs, nil
}

// decodeRedo decodes the record at the start of b.
func decodeRedo(b []byte) (lap, ts uint64, payload []byte, n int, ok bool) {
	if len(b) < redoHeader || binary.LittleEndian.Uint32(b) != redoMagic {
		return 0, 0, nil, 0, false
	}
	plen := int(binary.LittleEndian.Uint32(b[4:]))
	if plen > len(b)-redoHeader {
		return 0, 0, nil, 0, false
	}
	n = redoHeader + plen
	if crc32.Checksum(b[12:n], castagnoli) != binary.LittleEndian.Uint32(b[8:]) {
		return 0, 0, nil, 0, false
	}
	return binary.LittleEndian.Uint64(b[12:]), binary.LittleEndian.Uint64(b[20:]), b[redoHeader:n], n, true
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
	b := append(l.buf[:0], make([]byte, redoHeader)...)
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
	binary.LittleEndian.PutUint32(b, redoMagic)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-redoHeader))
	binary.LittleEndian.PutUint64(b[12:], l.lap)
	binary.LittleEndian.PutUint64(b[20:], ts)
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b[12:], castagnoli))
	l.buf = b
	return b
}

// startLap begins a lap, with a new id, at the start of the log, and
// syncs its first record. The caller has made every group of the lap
// before durable in Badger (a checkpoint); once the new lap's record is
// on disk, that lap is never read again.
func (l *redoLog) startLap() error {
	l.lap = rand.Uint64()
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

// recordMax is an upper bound on the size of the record of entries.
func recordMax(entries []entry) int64 {
	n := int64(redoHeader)
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
	return nil
}

// sync makes the records written so far durable.
func (l *redoLog) sync() error { return fdatasync(l.f) }

func (l *redoLog) close() error { return l.f.Close() }
