package persistence

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/contextinfinity/ctxinf/messages"
)

// A sealed segment (one appends no longer go to: full, or its store
// closed) gets a small index beside it, {n}.jidx: which steps have
// records in it and where, so that a store's first use reads the
// indexes instead of every segment's records. Its format, little-endian:
//
//	"CTXJIDX1"                                  8 bytes
//	the segment's size, its modification time   8 + 8 bytes (unix ns)
//	the number of entries                       4 bytes
//	per entry: step id, from, to                16 + 8 + 8 bytes
//	CRC-32C of everything before                4 bytes
//
// An index is written only once its segment's bytes are durable, and is
// trusted only if it is whole (its checksum) and its segment has the
// size and modification time it records; otherwise the segment is read
// as before (scan). It is not synced itself: a crash that loses or tears
// it costs one scan, nothing else. Remove deletes the index of a segment
// it erases records in, durably, before erasing, and writes it again
// after: an index never lists a step whose records are zeros.

// segmentIndexExt is the file name extension of a segment's index.
const segmentIndexExt = ".jidx"

const (
	segIndexMagic  = "CTXJIDX1"
	segIndexHeader = len(segIndexMagic) + 8 + 8 + 4
	segIndexEntry  = 16 + 8 + 8
)

// maxSegmentIndexBytes bounds the index read for a segment: more
// entries than a segment's size allows records is not an index.
func maxSegmentIndexBytes(size int64) int64 {
	return int64(segIndexHeader) + (size/(stepIDLen+1)+1)*segIndexEntry + 4
}

func segmentIndexPath(segPath string) string {
	return strings.TrimSuffix(segPath, segmentExt) + segmentIndexExt
}

// encodeSegmentIndex returns the index of g's records (its steps' parts
// in g, in offset order) for a segment of size bytes modified at mtime;
// s.mu is held.
func (s *SegmentJournals) encodeSegmentIndex(g *segment, size, mtime int64) []byte {
	type entry struct {
		step     messages.StepID
		from, to int64
	}
	entries := make([]entry, 0, len(g.steps))
	for step := range g.steps {
		for _, p := range s.steps[step] {
			if p.seg == g {
				entries = append(entries, entry{step, p.from, p.to})
			}
		}
	}
	slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(a.from, b.from) })
	b := make([]byte, 0, segIndexHeader+len(entries)*segIndexEntry+4)
	b = append(b, segIndexMagic...)
	b = binary.LittleEndian.AppendUint64(b, uint64(size))
	b = binary.LittleEndian.AppendUint64(b, uint64(mtime))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(entries)))
	for _, e := range entries {
		b = append(b, e.step[:]...)
		b = binary.LittleEndian.AppendUint64(b, uint64(e.from))
		b = binary.LittleEndian.AppendUint64(b, uint64(e.to))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// segIndexEntryOf is one entry of a segment's index.
type segIndexEntryOf struct {
	step     messages.StepID
	from, to int64
}

// decodeSegmentIndex returns the entries of index b if it is whole and
// describes a segment of size bytes modified at mtime.
func decodeSegmentIndex(b []byte, size, mtime int64) ([]segIndexEntryOf, error) {
	if len(b) < segIndexHeader+4 || string(b[:len(segIndexMagic)]) != segIndexMagic {
		return nil, errors.New("not a segment index")
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, errors.New("checksum mismatch")
	}
	at := len(segIndexMagic)
	isize, imtime := int64(binary.LittleEndian.Uint64(b[at:])), int64(binary.LittleEndian.Uint64(b[at+8:]))
	n := int(binary.LittleEndian.Uint32(b[at+16:]))
	if isize != size || imtime != mtime {
		return nil, fmt.Errorf("written for a segment of %d bytes modified at %d, not %d at %d", isize, imtime, size, mtime)
	}
	if len(body) != segIndexHeader+n*segIndexEntry {
		return nil, fmt.Errorf("%d entries in %d bytes", n, len(body))
	}
	entries := make([]segIndexEntryOf, n)
	for i := range entries {
		e := body[segIndexHeader+i*segIndexEntry:]
		copy(entries[i].step[:], e[:16])
		entries[i].from = int64(binary.LittleEndian.Uint64(e[16:]))
		entries[i].to = int64(binary.LittleEndian.Uint64(e[24:]))
		if entries[i].step.IsZero() || entries[i].from < 0 || entries[i].from >= entries[i].to || entries[i].to > size {
			return nil, fmt.Errorf("entry %d: step %s at [%d, %d) of %d bytes", i, entries[i].step, entries[i].from, entries[i].to, size)
		}
	}
	return entries, nil
}

// loadIndexed adds g's records to the index from g's own index, and
// reports whether it could (false: g is to be scanned); s.mu is held.
func (s *SegmentJournals) loadIndexed(g *segment) bool {
	fi, err := os.Stat(g.path)
	if err != nil {
		return false
	}
	ipath := segmentIndexPath(g.path)
	ifi, err := os.Stat(ipath)
	if err != nil || ifi.Size() > maxSegmentIndexBytes(fi.Size()) {
		return false
	}
	b, err := os.ReadFile(ipath)
	if err != nil {
		return false
	}
	entries, err := decodeSegmentIndex(b, fi.Size(), fi.ModTime().UnixNano())
	if err != nil {
		return false
	}
	for _, e := range entries {
		s.addPart(e.step, g, e.from, e.to)
	}
	g.written, g.synced = fi.Size(), fi.Size()
	return true
}

// writeIndex writes the index of sealed segment g, whose bytes are
// durable and whose file is closed; s.mu is held. A failure leaves no
// index (the segment is scanned at the next start).
func (s *SegmentJournals) writeIndex(g *segment) {
	g.mu.Lock()
	ok := g.f == nil && g.err == nil && !g.torn && g.synced == g.written
	g.mu.Unlock()
	if !ok {
		return
	}
	fi, err := os.Stat(g.path)
	if err != nil || fi.Size() != g.written {
		return
	}
	b := s.encodeSegmentIndex(g, fi.Size(), fi.ModTime().UnixNano())
	path := segmentIndexPath(g.path)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		os.Remove(tmp)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
	}
}

// removeIndexes deletes the indexes of segs, durably (the directory
// fsynced) when any was there.
func (s *SegmentJournals) removeIndexes(segs []*segment) error {
	removed := false
	for _, g := range segs {
		err := os.Remove(segmentIndexPath(g.path))
		switch {
		case err == nil:
			removed = true
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
	}
	if removed {
		return syncDir(s.dir)
	}
	return nil
}
