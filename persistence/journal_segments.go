package persistence

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/contextinfinity/ctxinf/messages"
)

// SegmentJournals keeps the stream journals of a directory (the
// runtime's {data_dir}/streams) in a few shared append-only files, its
// segments, rather than a file per step: creating a file costs this
// kernel's inode allocator and the directory's lock more CPU than the
// rest of a step's journal, and each new file's first fsync also flushes
// its inode and its directory entry. A segment is created once per
// segmentSize bytes; a step's fsync is an fdatasync of a file that
// exists already, shared by every journal that syncs meanwhile.
//
// Each line of a segment is one record of one step's journal:
//
//	<step id, 26 characters><' '><a line of the step's journal>\n   a whole line
//	<step id><'~'><part of a line>\n                               bytes without their newline (a journal's torn write)
//	<step id>\n                                                    the journal exists (one that closed empty)
//
// A step's journal as the SRD names it, {dir}/{step_id}.jsonl, is the
// concatenation of its records in order (Open returns those bytes; so
// does `ctxinf inspect --journal`), byte for byte the file one journal
// per file would have written: sealed lines are sealed the same way,
// under the step's key with the line's number in the step's journal as
// additional data, so a record moved to another step or position does
// not open. A crash mid-write leaves a segment's last record without its
// newline: a torn final line of its step, dropped on reading as in a
// file of its own. Lines that do not start with a step id (zeros a power
// loss left past the last fdatasync, records Remove erased) belong to no
// step and are skipped.
//
// Remove overwrites a step's records with zeros (a segment whose every
// step is removed is deleted instead), so erased content leaves the
// files. The journals of an earlier version, one {step_id}.jsonl file
// each in the same directory, are read, listed and removed as before.
//
// The index of which steps have records in which segment, and where, is
// kept in memory, read at first use from the sealed segments' own
// indexes (journal_segment_index.go) and from the segments that have
// none (the one being written when the process died): the directory is
// one process's (its data directory's lock), and a store that another
// store of the same directory writes to meanwhile sees only the records
// that were there when it read them. Close closes the segment being
// written.
type SegmentJournals struct {
	dir    string
	size   int64      // segmentSize, or a test's
	mu     sync.Mutex // the index, the active segment and its appends
	loaded bool
	steps  map[messages.StepID][]segPart // each step's records, by segment in order
	segs   map[uint64]*segment
	active *segment // nil until the first append, and after a failed one
	next   uint64   // the number of the next segment to create
	closed bool
	// scanned counts the segments load read record by record, having
	// no index to trust.
	scanned int

	removeMu sync.Mutex // one Remove at a time: each rewrites ranges it read
}

// segmentExt is the file name extension of a journal segment.
const segmentExt = ".jseg"

// segmentSize is the size past which appends go to a new segment.
const segmentSize = 16 << 20

// stepIDLen is the length of a step id's text, a record's prefix.
const stepIDLen = 26

// Record separators after the step id (see SegmentJournals).
const (
	recLine    = ' '
	recPartial = '~'
)

// NewSegmentJournals returns the journals of dir as segments. It does no
// I/O: dir is read at first use, and made (if missing) at the first
// append.
func NewSegmentJournals(dir string) *SegmentJournals {
	return &SegmentJournals{dir: dir, size: segmentSize}
}

// segPart says where a step's records are in one segment: in [from, to).
type segPart struct {
	seg      *segment
	from, to int64
}

// segment is one segment file.
type segment struct {
	num   uint64
	path  string
	steps map[messages.StepID]struct{} // the steps with records here; under SegmentJournals.mu
	// erasing is set while Remove erases records here (under
	// SegmentJournals.mu): the index is written after, not meanwhile.
	erasing bool

	mu      sync.Mutex
	cond    *sync.Cond
	f       *os.File // open for appends: the active segment, until it is retired
	written int64    // the file's size
	synced  int64    // bytes known durable
	busy    bool     // an fdatasync is under way
	err     error    // a failed fdatasync: nothing unsynced is trusted
	torn    bool     // a write failed: its last record may be cut short (no index)
}

func newSegment(num uint64, path string) *segment {
	g := &segment{num: num, path: path, steps: map[messages.StepID]struct{}{}}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func segmentName(num uint64) string { return fmt.Sprintf("%016d%s", num, segmentExt) }

// Name names step's journal: the path the SRD gives it, {dir}/{step_id}.jsonl.
func (s *SegmentJournals) Name(step messages.StepID) string { return JournalPath(s.dir, step) }

// Sink returns the sink of step's new journal.
func (s *SegmentJournals) Sink(step messages.StepID) JournalSink {
	return &segSink{s: s, step: step}
}

// load reads the index from dir, once; s.mu is held.
func (s *SegmentJournals) load() error {
	if s.loaded {
		return nil
	}
	if s.closed {
		return fmt.Errorf("stream journals %s: %w", s.dir, ErrClosed)
	}
	s.steps = map[messages.StepID][]segPart{}
	s.segs = map[uint64]*segment{}
	des, err := os.ReadDir(s.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read stream journals: %w", err)
	}
	for _, de := range des {
		stem, ok := strings.CutSuffix(de.Name(), segmentExt)
		if !ok || !de.Type().IsRegular() {
			continue
		}
		num, err := strconv.ParseUint(stem, 10, 64)
		if err != nil || segmentName(num) != de.Name() {
			continue
		}
		g := newSegment(num, filepath.Join(s.dir, de.Name()))
		if !s.loadIndexed(g) {
			s.scanned++
			if err := s.scan(g); err != nil {
				return fmt.Errorf("read stream journal segment %s: %w", g.path, err)
			}
		}
		s.segs[num] = g
		s.next = max(s.next, num+1)
	}
	// Segments were read in name order, which is number order: each
	// step's parts are in segment order.
	s.loaded = true
	return nil
}

// scan adds g's records to the index; s.mu is held.
func (s *SegmentJournals) scan(g *segment) error {
	f, err := os.Open(g.path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	var off int64
	for {
		line, err := br.ReadSlice('\n')
		n := int64(len(line))
		var prefix [stepIDLen + 1]byte
		pn := copy(prefix[:], line)
		for errors.Is(err, bufio.ErrBufferFull) {
			// A long line: only its prefix and its length matter here.
			line, err = br.ReadSlice('\n')
			pn += copy(prefix[pn:], line)
			n += int64(len(line))
		}
		if err != nil && err != io.EOF {
			return err
		}
		if n == 0 {
			break
		}
		if step, ok := recordStep(prefix[:pn]); ok {
			s.addPart(step, g, off, off+n)
		}
		off += n
		if err == io.EOF {
			break
		}
	}
	g.written, g.synced = off, off
	return nil
}

// recordStep returns the step of a record that starts with p (its first
// stepIDLen+1 bytes, or fewer at the end of a segment). A prefix of a
// step id and nothing else is a record's torn beginning: its step has a
// journal, with nothing of this record in it.
func recordStep(p []byte) (messages.StepID, bool) {
	if len(p) < stepIDLen {
		return messages.StepID{}, false
	}
	if len(p) > stepIDLen {
		if c := p[stepIDLen]; c != recLine && c != recPartial && c != '\n' {
			return messages.StepID{}, false
		}
	}
	text := string(p[:stepIDLen])
	step, err := messages.ParseID[messages.StepID](text)
	if err != nil || step.IsZero() || step.String() != text {
		return messages.StepID{}, false
	}
	return step, true
}

// addPart records that step has records in [from, to) of g; s.mu is held.
func (s *SegmentJournals) addPart(step messages.StepID, g *segment, from, to int64) {
	parts := s.steps[step]
	if k := len(parts) - 1; k >= 0 && parts[k].seg == g {
		parts[k].to = to
		return
	}
	s.steps[step] = append(parts, segPart{seg: g, from: from, to: to})
	g.steps[step] = struct{}{}
}

// create registers step's journal, exclusively.
func (s *SegmentJournals) create(step messages.StepID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return err
	}
	if _, ok := s.steps[step]; ok {
		return &fs.PathError{Op: "create", Path: s.Name(step), Err: fs.ErrExist}
	}
	s.steps[step] = nil
	return nil
}

// append writes rec, whole records of step, to the active segment and
// returns the segment and its size after them.
func (s *SegmentJournals) append(step messages.StepID, rec []byte) (*segment, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return nil, 0, err
	}
	g, err := s.activeFor(int64(len(rec)))
	if err != nil {
		return nil, 0, err
	}
	from := g.written
	n, err := g.f.Write(rec)
	g.mu.Lock()
	g.written += int64(n)
	g.mu.Unlock()
	if err != nil {
		// A part of a record may be in the file: it must stay the
		// segment's last bytes, a torn final line. Appends go on in a
		// new segment.
		s.active = nil
		g.mu.Lock()
		g.torn = true
		g.mu.Unlock()
		s.retire(g)
		if n > 0 {
			s.addPart(step, g, from, from+int64(n))
		}
		return nil, 0, err
	}
	s.addPart(step, g, from, g.written)
	return g, g.written, nil
}

// activeFor returns the segment that takes an append of n bytes,
// creating one when there is none, the active one is full or its
// fdatasync failed; s.mu is held.
func (s *SegmentJournals) activeFor(n int64) (*segment, error) {
	if s.closed {
		return nil, fmt.Errorf("stream journals %s: %w", s.dir, ErrClosed)
	}
	if g := s.active; g != nil {
		g.mu.Lock()
		full, failed := g.written > 0 && g.written+n > s.size, g.err != nil
		g.mu.Unlock()
		if !full && !failed {
			return g, nil
		}
		s.active = nil
		s.retire(g)
		if !g.erasing {
			s.writeIndex(g)
		}
	}
	// Journals hold conversation content: owner-only permissions.
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, err
	}
	for {
		num := s.next
		s.next++
		path := filepath.Join(s.dir, segmentName(num))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue // another store's of this directory
		}
		if err != nil {
			return nil, err
		}
		// The segment's directory entry is durable before any record in
		// it counts as synced: a step's fsync is then an fdatasync.
		if err := syncDir(s.dir); err != nil {
			f.Close()
			os.Remove(path)
			return nil, err
		}
		g := newSegment(num, path)
		g.f = f
		s.segs[num] = g
		s.active = g
		return g, nil
	}
}

// retire syncs what g holds and closes its file: appends went on in
// another segment. A failed fdatasync sticks to g, so that the steps
// with records not yet synced in it learn of it at their Sync.
func (s *SegmentJournals) retire(g *segment) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.busy {
		g.cond.Wait()
	}
	if g.f == nil {
		return
	}
	if g.synced < g.written && g.err == nil {
		if err := Fdatasync(g.f); err != nil {
			g.err = err
		} else {
			g.synced = g.written
		}
	}
	g.f.Close()
	g.f = nil
}

// syncThrough returns once g's first end bytes are durable: by an
// fdatasync started after they were written, its own or another
// caller's.
func (g *segment) syncThrough(end int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.synced < end {
		switch {
		case g.err != nil:
			return g.err
		case g.busy:
			g.cond.Wait()
			continue
		case g.f == nil:
			return fmt.Errorf("stream journal segment %s: %w", g.path, ErrClosed)
		}
		g.busy = true
		target, f := g.written, g.f
		g.mu.Unlock()
		err := Fdatasync(f)
		g.mu.Lock()
		g.busy = false
		g.cond.Broadcast()
		if err != nil {
			g.err = err
			return err
		}
		g.synced = max(g.synced, target)
	}
	return nil
}

// Open returns the bytes of step's journal: its records in the segments,
// as the file {dir}/{step_id}.jsonl would hold them, or an earlier
// version's file of that name.
func (s *SegmentJournals) Open(_ context.Context, step messages.StepID) (io.ReadCloser, error) {
	s.mu.Lock()
	err := s.load()
	parts, ok := s.steps[step]
	parts = slices.Clone(parts)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !ok {
		return os.Open(JournalPath(s.dir, step))
	}
	var view []byte
	prefix := step.String()
	for _, p := range parts {
		b, err := readRange(p.seg.path, p.from, p.to)
		if err != nil {
			return nil, fmt.Errorf("read the stream journal of step %s: %w", step, err)
		}
		view = appendView(view, b, prefix)
	}
	return io.NopCloser(bytes.NewReader(view)), nil
}

// readRange reads [from, to) of the file at path.
func readRange(path string, from, to int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, to-from)
	if _, err := f.ReadAt(b, from); err != nil {
		return nil, err
	}
	return b, nil
}

// appendView appends to view the journal bytes of the records of the
// step whose id is prefix among the records of b.
func appendView(view, b []byte, prefix string) []byte {
	for len(b) > 0 {
		line := b
		next := len(b)
		nl := bytes.IndexByte(b, '\n')
		if nl >= 0 {
			line, next = b[:nl], nl+1
		}
		b = b[next:]
		if len(line) <= stepIDLen || string(line[:stepIDLen]) != prefix {
			continue // another step's, an erased one, or this step's mark
		}
		body := line[stepIDLen+1:]
		switch line[stepIDLen] {
		case recLine:
			view = append(view, body...)
			if nl >= 0 {
				view = append(view, '\n')
			} // else: the segment's torn last record, without its newline
		case recPartial:
			view = append(view, body...)
		}
	}
	return view
}

// List returns the steps that have a journal, in segments or in files of
// their own, in id order.
func (s *SegmentJournals) List(context.Context) ([]messages.StepID, error) {
	s.mu.Lock()
	err := s.load()
	steps := make([]messages.StepID, 0, len(s.steps))
	for step := range s.steps {
		steps = append(steps, step)
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	files, err := ListJournals(s.dir)
	if err != nil {
		return nil, err
	}
	steps = append(steps, files...)
	slices.SortFunc(steps, messages.StepID.Compare)
	return slices.Compact(steps), nil
}

// Remove removes the journals of steps: their records are overwritten
// with zeros and fdatasynced, a segment left with no step's records is
// deleted (unless appends still go to it), and so is a step's file of an
// earlier version; then dir is fsynced if an entry went.
func (s *SegmentJournals) Remove(ctx context.Context, steps []messages.StepID) (int, error) {
	if len(steps) == 0 {
		return 0, nil
	}
	s.removeMu.Lock()
	defer s.removeMu.Unlock()
	s.mu.Lock()
	if err := s.load(); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	had := make(map[messages.StepID]bool, len(steps))
	erase := map[*segment][]segPart{} // in the segments that stay
	var drop []*segment
	for _, step := range steps {
		parts, ok := s.steps[step]
		if !ok {
			continue
		}
		had[step] = true
		delete(s.steps, step)
		for _, p := range parts {
			delete(p.seg.steps, step)
			erase[p.seg] = append(erase[p.seg], p)
		}
	}
	var kept []*segment
	for g := range erase {
		if len(g.steps) == 0 && g != s.active {
			delete(erase, g)
			delete(s.segs, g.num)
			drop = append(drop, g)
		} else {
			g.erasing = true
			kept = append(kept, g)
		}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		for _, g := range kept {
			g.erasing = false
		}
		s.mu.Unlock()
	}()

	// An index lists the steps it was written with: it goes, durably,
	// before their records do, and is written again after.
	if err := s.removeIndexes(append(kept, drop...)); err != nil {
		return 0, fmt.Errorf("remove stream journals: %w", err)
	}
	for g, parts := range erase {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := eraseRecords(g.path, parts, steps); err != nil {
			return 0, fmt.Errorf("remove stream journals from segment %s: %w", g.path, err)
		}
		s.mu.Lock()
		if g != s.active {
			s.writeIndex(g)
		}
		s.mu.Unlock()
	}
	dirty := false
	for _, g := range drop {
		s.retire(g)
		if err := os.Remove(g.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("remove stream journal segment %s: %w", g.path, err)
		}
		dirty = true
	}
	n := 0
	if err := removeJournalFiles(ctx, s.dir, steps, func(step messages.StepID, removed bool) {
		dirty = dirty || removed
		if removed || had[step] {
			n++
		}
	}); err != nil {
		return n, err
	}
	if dirty {
		if err := syncDir(s.dir); err != nil {
			return n, fmt.Errorf("remove stream journals: %w", err)
		}
	}
	return n, nil
}

// eraseRecords erases the records of steps in the parts of the segment
// at path, and fsyncs it. The ranges of dead lines (the steps' records,
// and lines that belong to no step: erased before, or torn) are merged,
// and each is made zeros but for its last newline, so that the lines
// around stay whole: by punching a hole (the file system frees the
// blocks it covers), or by writing zeros where holes are not supported.
func eraseRecords(path string, parts []segPart, steps []messages.StepID) error {
	prefixes := make(map[string]bool, len(steps))
	for _, step := range steps {
		prefixes[step.String()] = true
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var dead []span
	for _, p := range parts {
		b := make([]byte, p.to-p.from)
		if _, err := f.ReadAt(b, p.from); err != nil {
			return err
		}
		for off := 0; off < len(b); {
			end := len(b)
			if nl := bytes.IndexByte(b[off:], '\n'); nl >= 0 {
				end = off + nl + 1
			}
			line := b[off:end]
			if _, ok := recordStep(line[:min(len(line), stepIDLen+1)]); !ok ||
				len(line) >= stepIDLen && prefixes[string(line[:stepIDLen])] {
				dead = append(dead, span{p.from + int64(off), p.from + int64(end), line[len(line)-1] == '\n'})
			}
			off = end
		}
	}
	slices.SortFunc(dead, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	for i := 0; i < len(dead); {
		m := dead[i]
		for i++; i < len(dead) && dead[i].from <= m.to; i++ {
			if dead[i].to >= m.to {
				m.to, m.newline = dead[i].to, dead[i].newline
			}
		}
		to := m.to
		if m.newline {
			to-- // the newline stays: the next line starts after it
		}
		if to > m.from {
			if err := zeroRange(f, m.from, to); err != nil {
				return err
			}
		}
	}
	return f.Sync()
}

// span is a range of whole lines of a segment; newline: it ends with one.
type span struct {
	from, to int64
	newline  bool
}

// zeroRange makes [from, to) of f read as zeros: a hole punched, or
// zeros written.
func zeroRange(f *os.File, from, to int64) error {
	if err := punchHole(f, from, to-from); err == nil {
		return nil
	}
	zeros := make([]byte, min(to-from, 1<<16))
	for off := from; off < to; {
		n, err := f.WriteAt(zeros[:min(int64(len(zeros)), to-off)], off)
		if err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// Close fdatasyncs and closes the segment being written, and writes its
// index (the next store appends to a new segment); the store takes no
// more appends. A failed fdatasync leaves the segment without an index,
// its unsynced bytes with the OS (as a file's are when it is closed).
func (s *SegmentJournals) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if g := s.active; g != nil {
		s.active = nil
		g.mu.Lock()
		for g.busy {
			g.cond.Wait()
		}
		if g.synced < g.written && g.err == nil {
			if err := Fdatasync(g.f); err != nil {
				g.err = err
			} else {
				g.synced = g.written
			}
		}
		err := g.f.Close()
		g.f = nil
		g.mu.Unlock()
		if err == nil && !g.erasing {
			s.writeIndex(g)
		}
		return err
	}
	return nil
}

// segSink is one step's journal in the segments.
type segSink struct {
	s       *SegmentJournals
	step    messages.StepID
	id      [stepIDLen]byte // step's text
	created bool
	wrote   bool // a record is in a segment
	closed  bool
	pending []segMark // what was appended since the last good Sync
}

// segMark is the end of a sink's appends in a segment.
type segMark struct {
	seg *segment
	end int64
}

func (k *segSink) Create() error {
	if err := k.s.create(k.step); err != nil {
		return err
	}
	k.created = true
	copy(k.id[:], k.step.String())
	return nil
}

// Write appends p's lines as records of the step; a final part without
// its newline is a record of its own (recPartial).
func (k *segSink) Write(p []byte) (int, error) {
	if !k.created || k.closed {
		return 0, fmt.Errorf("stream journal %s: %w", k.step, ErrClosed)
	}
	if len(p) == 0 {
		return 0, nil
	}
	// Each line takes its step id and separator; a part without its
	// newline takes one more byte.
	rec := slices.Grow(getJournalBuf(), len(p)+(bytes.Count(p, []byte{'\n'})+1)*(stepIDLen+2))
	for rest := p; len(rest) > 0; {
		rec = append(rec, k.id[:]...)
		if nl := bytes.IndexByte(rest, '\n'); nl >= 0 {
			rec = append(rec, recLine)
			rec = append(rec, rest[:nl+1]...)
			rest = rest[nl+1:]
		} else {
			rec = append(rec, recPartial)
			rec = append(rec, rest...)
			rec = append(rec, '\n')
			rest = nil
		}
	}
	err := k.appendRec(rec)
	putJournalBuf(rec)
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (k *segSink) appendRec(rec []byte) error {
	g, end, err := k.s.append(k.step, rec)
	if err != nil {
		return err
	}
	k.wrote = true
	if n := len(k.pending); n > 0 && k.pending[n-1].seg == g {
		k.pending[n-1].end = end
	} else {
		k.pending = append(k.pending, segMark{g, end})
	}
	return nil
}

// Sync fdatasyncs the segments the step appended to since its last Sync.
func (k *segSink) Sync() error {
	for len(k.pending) > 0 {
		m := k.pending[0]
		if err := m.seg.syncThrough(m.end); err != nil {
			return fmt.Errorf("fdatasync %s: %w", m.seg.path, err)
		}
		k.pending = k.pending[1:]
	}
	return nil
}

// Close marks a journal that wrote nothing as existing (a record of its
// step id alone); nothing is synced.
func (k *segSink) Close() error {
	if k.closed {
		return nil
	}
	k.closed = true
	if !k.created || k.wrote {
		return nil
	}
	var rec [stepIDLen + 1]byte
	copy(rec[:], k.id[:])
	rec[stepIDLen] = '\n'
	return k.appendRec(rec[:])
}
