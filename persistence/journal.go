package persistence

import (
	"bufio"
	"bytes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// The stream journal (SRD §13): JSON Lines per streaming provider step,
// the file {dir}/{step_id}.jsonl as the SRD names it, or the same bytes
// as one step's records in shared segment files (SegmentJournals, the
// runtime's) or in the rows of a shared database (JournalStore, package
// pgdb), holding every raw provider event in arrival order so that a
// crash mid-stream leaves the partial output recoverable.
// Each line is
//
//	{"ts":"<RFC3339Nano UTC>","provider":"...","event_type":"...","seq":N,"payload":<raw JSON>}
//
// with seq counting from 1. In the journal of an encrypted store
// (JournalPolicy.Cipher) each line is instead
//
//	!<base64 of key id | nonce | AES-GCM of the line above, without its newline>
//
// (standard base64 without padding), sealed under the file's key with the
// line's number as additional data: lines are still told apart by their
// newlines, so a torn final line is found and dropped as in a plain one,
// and a line moved, dropped from the middle or copied from another
// journal does not open. The journal does no I/O on its own schedule: it
// starts no goroutines and reads time only through the injected clock, so
// its owner (an actor) drives it with Append and a periodic Tick.

// journalExt is the file name extension of a stream journal.
const journalExt = ".jsonl"

// JournalPolicy says how long appended bytes may wait in the journal's
// buffer and how long written bytes may wait for an fsync. Every field
// but Cipher must be more than 0: their values are the configuration's
// stream section (SRD §13.2; internal/config), which internal/wiring maps
// onto them. The intervals are honoured as often as the owner calls
// Append or Tick: a journal never acts between calls.
type JournalPolicy struct {
	// FlushInterval: buffered bytes are written to the OS once this much
	// time has passed since the last write.
	FlushInterval time.Duration
	// FlushBytes: buffered bytes are written to the OS as soon as at
	// least this many are buffered.
	FlushBytes int
	// FsyncInterval: bytes not yet durable are written and fsynced once
	// this much time has passed since the last fsync.
	FsyncInterval time.Duration
	// Cipher, when set, encrypts each line (that of an encrypted store:
	// DB.Cipher); nil writes plain JSON lines.
	Cipher *Cipher
}

// Check reports every field of p that is not more than 0, naming it.
func (p JournalPolicy) Check() error {
	var errs []error
	if p.FlushInterval <= 0 {
		errs = append(errs, fmt.Errorf("%w: FlushInterval: %v, want more than 0", ErrInvalidArgument, p.FlushInterval))
	}
	if p.FlushBytes <= 0 {
		errs = append(errs, fmt.Errorf("%w: FlushBytes: %d, want more than 0", ErrInvalidArgument, p.FlushBytes))
	}
	if p.FsyncInterval <= 0 {
		errs = append(errs, fmt.Errorf("%w: FsyncInterval: %v, want more than 0", ErrInvalidArgument, p.FsyncInterval))
	}
	return errors.Join(errs...)
}

// JournalEntry is one line of a stream journal. Payload is the provider's
// event exactly as written; an empty payload was written (and reads back)
// as null.
type JournalEntry struct {
	TS        time.Time // UTC
	Provider  string
	EventType string
	Seq       uint64 // from 1, strictly increasing within a journal
	Payload   json.RawMessage
	// Text is the text the event displayed, normalized by the adapter
	// ("" for events that show none): what recovery shows after a crash.
	Text string
}

// JournalCounters are the byte counts shown as "Stream: durable/displayed"
// (SRD §13.3). Displayed counts the bytes of every journal line handed to
// Append; Durable counts those known to be fsynced. Durable <= Displayed,
// and they are equal after Close.
type JournalCounters struct {
	Displayed uint64
	Durable   uint64
}

// Buffered reports whether some displayed output is not yet durable.
func (c JournalCounters) Buffered() bool { return c.Durable < c.Displayed }

// Journal appends the raw events of one streaming provider step to its
// journal, in a JournalStore (a file: NewJournal, CreateJournal; a
// database's table: NewJournalIn, CreateJournalIn). Its flush is the
// sink's Write, its fsync the sink's Sync. It is not safe for concurrent use: one owner calls every
// method, including Tick on a timer of its own. After a write or fsync
// fails, every later Append and Tick returns that error.
type Journal struct {
	sink     JournalSink
	opened   bool // sink.Create succeeded
	path     string
	step     messages.StepID
	provider string
	policy   JournalPolicy
	now      func() time.Time

	aead      cipher.AEAD // with policy.Cipher: the journal's key
	sealed    []byte      // a line being sealed
	buf       []byte      // lines appended but not yet written
	seq       uint64      // seq of the last appended line
	written   uint64      // bytes handed to the sink
	counters  JournalCounters
	lastFlush time.Time // last write to the sink (or creation)
	lastSync  time.Time // last sync (or creation)
	err       error     // sticky write/sync error
	closed    bool
}

// JournalPath returns the journal file of step in dir: {dir}/{step_id}.jsonl.
func JournalPath(dir string, step messages.StepID) string {
	return filepath.Join(dir, step.String()+journalExt)
}

// CreateJournal creates the journal of step in dir (the runtime passes
// {data_dir}/streams), making dir if it is missing. A step's journal is
// created once: if the file exists CreateJournal returns an error wrapping
// fs.ErrExist and leaves the file alone. A zero step, empty dir or empty
// provider is ErrInvalidArgument. now is the clock used for timestamps and
// the policy's intervals; nil means time.Now.
func CreateJournal(dir string, step messages.StepID, provider string, p JournalPolicy, now func() time.Time) (*Journal, error) {
	j, err := NewJournal(dir, step, provider, p, now)
	if err != nil {
		return nil, err
	}
	if err := j.open(); err != nil {
		return nil, err
	}
	return j, nil
}

// NewJournal is CreateJournal without touching the file system: the file
// is created (exclusively, making dir if missing) when the journal first
// writes to the OS, which Append does when its policy says so, or at
// Close. A step's first events then never wait for a file system busy
// with other files' fsyncs; they are displayed from the buffer, and were
// not durable before their first fsync either way. If the file exists by
// then, that write fails with an error wrapping fs.ErrExist, which sticks.
func NewJournal(dir string, step messages.StepID, provider string, p JournalPolicy, now func() time.Time) (*Journal, error) {
	if dir == "" && !step.IsZero() {
		return nil, fmt.Errorf("create journal %s: %w: dir is empty", step, ErrInvalidArgument)
	}
	return newJournal(FileJournals(dir), step, provider, p, now)
}

// newJournal is NewJournal of a journal of store s.
func newJournal(s JournalStore, step messages.StepID, provider string, p JournalPolicy, now func() time.Time) (*Journal, error) {
	if step.IsZero() {
		return nil, fmt.Errorf("create journal: %w: step id is zero", ErrInvalidArgument)
	}
	if provider == "" {
		return nil, fmt.Errorf("create journal %s: %w: provider is empty", step, ErrInvalidArgument)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("create journal %s: policy: %w", step, err)
	}
	if now == nil {
		now = time.Now
	}
	var aead cipher.AEAD
	if p.Cipher != nil {
		var err error
		if aead, err = p.Cipher.journalAEAD(step.String()); err != nil {
			return nil, fmt.Errorf("create journal %s: %w", step, err)
		}
	}
	t := now()
	return &Journal{
		aead:      aead,
		sink:      s.Sink(step),
		path:      s.Name(step),
		step:      step,
		provider:  provider,
		policy:    p,
		now:       now,
		lastFlush: t,
		lastSync:  t,
	}, nil
}

// open creates the journal in its store; an error sticks.
func (j *Journal) open() error {
	if j.opened || j.err != nil {
		return j.err
	}
	if err := j.sink.Create(); err != nil {
		j.err = fmt.Errorf("create journal %s: %w", j.step, err)
		return j.err
	}
	j.opened = true
	return nil
}

// SyncDir fsyncs a directory so that its entries created or removed
// survive a crash (nothing on Windows).
func SyncDir(dir string) error { return syncDir(dir) }

// syncDir fsyncs a directory so that entries created in it survive a crash.
// Windows cannot open directories for syncing; there it does nothing.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	return SyncPath(dir, os.O_RDONLY)
}

// SyncPath opens path with flag, fsyncs it and closes it.
func SyncPath(path string, flag int) error {
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Path names the journal (JournalStore.Name): its file's path, for a
// journal of FileJournals.
func (j *Journal) Path() string { return j.path }

// Counters returns the displayed and durable byte counts.
func (j *Journal) Counters() JournalCounters { return j.counters }

// Append adds one provider event, stamped with now() and the next seq,
// then writes and fsyncs as the policy requires. payload must be valid
// JSON; it is written verbatim unless it holds newlines, which are
// compacted away so that the entry stays on one line. An empty payload is
// written as null. Invalid JSON is ErrInvalidArgument and appends nothing.
func (j *Journal) Append(eventType string, payload json.RawMessage) (JournalCounters, error) {
	return j.AppendText(eventType, payload, "")
}

// AppendText is Append for an event that displayed text: the line also
// holds "text", the normalized text, so that recovery shows exactly what
// was displayed whatever the provider's event shapes.
func (j *Journal) AppendText(eventType string, payload json.RawMessage, text string) (JournalCounters, error) {
	if err := j.usable(); err != nil {
		return j.counters, err
	}
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	} else if !json.Valid(payload) {
		return j.counters, fmt.Errorf("journal %s: append seq %d: %w: payload is not valid JSON", j.step, j.seq+1, ErrInvalidArgument)
	}
	t := j.now()
	if j.buf == nil {
		j.buf = getJournalBuf()
	}
	start := len(j.buf)
	// RFC 3339 holds nothing JSON escapes.
	j.buf = append(j.buf, `{"ts":"`...)
	j.buf = t.UTC().AppendFormat(j.buf, time.RFC3339Nano)
	j.buf = append(j.buf, `","provider":`...)
	j.buf = appendJSONString(j.buf, j.provider)
	j.buf = append(j.buf, `,"event_type":`...)
	j.buf = appendJSONString(j.buf, eventType)
	j.buf = append(j.buf, `,"seq":`...)
	j.buf = strconv.AppendUint(j.buf, j.seq+1, 10)
	j.buf = append(j.buf, `,"payload":`...)
	if bytes.IndexByte(payload, '\n') >= 0 {
		var b bytes.Buffer
		// Cannot fail: payload is valid JSON.
		_ = json.Compact(&b, payload)
		j.buf = append(j.buf, b.Bytes()...)
	} else {
		j.buf = append(j.buf, payload...)
	}
	if text != "" {
		j.buf = append(j.buf, `,"text":`...)
		j.buf = appendJSONString(j.buf, text)
	}
	j.buf = append(j.buf, '}')
	if j.aead != nil {
		j.buf = j.sealLine(j.buf, start, j.seq+1)
	}
	j.buf = append(j.buf, '\n')
	j.seq++
	j.counters.Displayed += uint64(len(j.buf) - start)
	return j.counters, j.apply(t)
}

func appendJSONString(b []byte, s string) []byte { return messages.AppendJSONString(b, s) }

// sealedLinePrefix starts every line of an encrypted journal; a plain
// line starts with '{'.
const sealedLinePrefix = '!'

// sealLine replaces b[start:], the line numbered no, with its sealed form.
func (j *Journal) sealLine(b []byte, start int, no uint64) []byte {
	var ad [8]byte
	binary.BigEndian.PutUint64(ad[:], no)
	j.sealed = j.policy.Cipher.Seal(j.sealed[:0], j.aead, b[start:], ad[:])
	b = append(b[:start], sealedLinePrefix)
	b = base64.RawStdEncoding.AppendEncode(b, j.sealed)
	if cap(j.sealed) > 1<<20 {
		j.sealed = nil
	}
	return b
}

// Tick writes and fsyncs what the policy says is due at now(). The owner
// calls it on a timer, at least as often as the policy's intervals, so
// that output does not sit buffered between events.
func (j *Journal) Tick() (JournalCounters, error) {
	if err := j.usable(); err != nil {
		return j.counters, err
	}
	return j.counters, j.apply(j.now())
}

// Close writes and fsyncs everything appended, so that at completion the
// whole stream is durable (Durable == Displayed), then closes the file.
// Every journal closed has its file, even one that streamed nothing.
// Calls after the first return nil.
func (j *Journal) Close() error {
	if j.closed {
		return nil
	}
	j.closed = true
	err := j.err
	if err == nil {
		if err = j.open(); err == nil {
			err = j.sync(j.now())
		}
	}
	if cerr := j.sink.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("journal %s: close: %w", j.step, cerr)
	}
	putJournalBuf(j.buf)
	j.buf = nil
	return err
}

// journalBufs holds the buffers of closed journals for new ones: a
// journal's buffer grows to FlushBytes and more, and a step's journal
// lives for one step.
var journalBufs sync.Pool

// journalBufSize is the capacity of a new journal's buffer: the default
// FlushBytes (8 KiB) and a line past it.
const journalBufSize = 16 << 10

func getJournalBuf() []byte {
	if b, ok := journalBufs.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, journalBufSize)
}

// putJournalBuf keeps b for another journal, unless it grew large.
func putJournalBuf(b []byte) {
	if b == nil || cap(b) > 1<<20 {
		return
	}
	journalBufs.Put(&b)
}

// CloseDeferred is Close, or with fsync false Close without the fsync,
// with the work handed back: it ends the journal at once, without a
// system call, and returns finish, which creates the file if the journal
// never wrote, writes what is buffered, fsyncs the file and a new file's
// directory entry if fsync, and closes the file. The caller runs finish
// once, on any goroutine, for a journal whose output another write makes
// durable meanwhile (a step whose response a commit finalizes), and so
// may run it after that write: the file system's work (a file creation
// costs this VM up to a millisecond of CPU) is then off the caller's
// path and does not compete with it. Counters stay what they were
// (Durable: the last fsync before the close); the journal takes no more
// calls. A journal that had failed returns its error and no finish.
func (j *Journal) CloseDeferred(fsync bool) (finish func() error, err error) {
	if j.closed {
		return func() error { return nil }, nil
	}
	j.closed = true
	sink, opened, buf := j.sink, j.opened, j.buf
	j.buf = nil
	if j.err != nil {
		sink.Close()
		putJournalBuf(buf)
		return nil, j.err
	}
	unsynced := fsync && (j.written > j.counters.Durable || len(buf) > 0)
	return func() error {
		if !opened {
			if err := sink.Create(); err != nil {
				return fmt.Errorf("create journal %s: %w", j.step, err)
			}
		}
		var err error
		if len(buf) > 0 {
			if _, err = sink.Write(buf); err != nil {
				err = fmt.Errorf("journal %s: write: %w", j.step, err)
			}
		}
		putJournalBuf(buf) // the sink keeps no part of it
		if err == nil && unsynced {
			if err = sink.Sync(); err != nil {
				err = fmt.Errorf("journal %s: fsync: %w", j.step, err)
			}
		}
		if cerr := sink.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("journal %s: close: %w", j.step, cerr)
		}
		return err
	}, nil
}

// usable returns the reason the journal can take no more calls, if any.
func (j *Journal) usable() error {
	if j.closed {
		return fmt.Errorf("journal %s: %w", j.step, ErrClosed)
	}
	return j.err
}

// apply performs the writes and fsync that are due at t.
func (j *Journal) apply(t time.Time) error {
	if len(j.buf) > 0 && (len(j.buf) >= j.policy.FlushBytes || t.Sub(j.lastFlush) >= j.policy.FlushInterval) {
		if err := j.flush(t); err != nil {
			return err
		}
	}
	if j.counters.Durable < j.counters.Displayed && t.Sub(j.lastSync) >= j.policy.FsyncInterval {
		return j.sync(t)
	}
	return nil
}

// flush hands the buffer to the OS in one write.
func (j *Journal) flush(t time.Time) error {
	if len(j.buf) == 0 {
		return nil
	}
	if err := j.open(); err != nil {
		return err
	}
	n, err := j.sink.Write(j.buf)
	j.written += uint64(n)
	if err != nil {
		// Part of a line may be on disk; appending more would put a
		// corrupt line in the middle of the journal. Stop here.
		j.err = fmt.Errorf("journal %s: write: %w", j.step, err)
		return j.err
	}
	j.buf = j.buf[:0]
	j.lastFlush = t
	return nil
}

// sync writes the buffer and fsyncs the file, making everything displayed
// durable.
func (j *Journal) sync(t time.Time) error {
	if err := j.flush(t); err != nil {
		return err
	}
	if j.counters.Durable == j.written {
		return nil
	}
	if err := j.sink.Sync(); err != nil {
		// After a failed fsync the kernel may have dropped the dirty
		// pages; nothing written since the last good fsync can be trusted.
		j.err = fmt.Errorf("journal %s: fsync: %w", j.step, err)
		return j.err
	}
	j.counters.Durable = j.written
	j.lastSync = t
	return nil
}

// journalLine is the decoded form of one journal line.
type journalLine struct {
	TS        *string         `json:"ts"`
	Provider  *string         `json:"provider"`
	EventType *string         `json:"event_type"`
	Seq       *uint64         `json:"seq"`
	Payload   json.RawMessage `json:"payload"`
	Text      string          `json:"text"`
}

// ReadJournal reads the journal at path, for recovery after a crash. A
// torn final line — one without its trailing newline, or one that is not
// valid JSON when no line follows it — is what a crash mid-write leaves;
// it is discarded and reported with torn = true. Any other bad line, a
// line missing a field, or a seq that is not strictly increasing from 1
// is ErrCorrupt naming the line number (1-based). Other errors come from
// the file system (fs.ErrNotExist when there is no journal).
//
// c is the store's cipher (DB.Cipher; nil for a store without
// encryption). An encrypted journal read without it is ErrEncrypted, a
// plain one read with it ErrNotEncrypted, and one encrypted under another
// key ErrWrongKey; a final line that does not open is torn, like one that
// is not JSON.
func ReadJournal(path string, c *Cipher) (entries []JournalEntry, torn bool, err error) {
	j, err := RecoverJournal(path, c)
	return j.Entries, j.Torn, err
}

// RecoveredJournal is what a crash left of a step's journal.
type RecoveredJournal struct {
	Entries []JournalEntry
	Torn    bool   // a torn final line was dropped
	Size    uint64 // the bytes of the file, a torn line's included
	Valid   uint64 // the bytes of the complete lines, those of Entries
}

// RecoverJournal reads the journal at path as ReadJournal does, and
// counts the bytes of the file and of its complete lines: the counters of
// a step a crash interrupted.
func RecoverJournal(path string, c *Cipher) (RecoveredJournal, error) {
	f, err := os.Open(path)
	if err != nil {
		return RecoveredJournal{}, fmt.Errorf("read journal: %w", err)
	}
	defer f.Close()
	return recoverJournal(f, journalStem(filepath.Base(path)), path, c)
}

// recoverJournal reads the journal bytes of r, named name, whose key's
// label is stem (its step), with cipher c.
func recoverJournal(r io.Reader, stem, name string, c *Cipher) (RecoveredJournal, error) {
	o := &lineOpener{c: c}
	if c != nil {
		var err error
		if o.aead, err = c.journalAEAD(stem); err != nil {
			return RecoveredJournal{}, fmt.Errorf("read journal %s: %w", name, err)
		}
	}
	cr := &countingReader{r: r}
	entries, valid, torn, err := readJournalCounting(cr, o)
	if err != nil {
		return RecoveredJournal{}, fmt.Errorf("read journal %s: %w", name, err)
	}
	return RecoveredJournal{Entries: entries, Torn: torn, Size: cr.n, Valid: valid}, nil
}

type countingReader struct {
	r io.Reader
	n uint64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += uint64(n)
	return n, err
}

// readJournal decodes the lines of a plain journal from r; see
// ReadJournal.
func readJournal(r io.Reader) (entries []JournalEntry, torn bool, err error) {
	entries, _, torn, err = readJournalCounting(r, &lineOpener{})
	return entries, torn, err
}

// lineOpener turns a journal line as stored into its JSON: the line
// itself in a plain journal, the opened line in an encrypted one.
type lineOpener struct {
	c    *Cipher // nil: a plain journal
	aead cipher.AEAD
	buf  []byte
}

// errBadLine is returned by lineOpener.open for a line that does not
// open: torn if it is the last, corrupt otherwise.
var errBadLine = errors.New("sealed line does not open")

// open returns the JSON of line number no (from 1). The errors other than
// errBadLine say the journal and the key do not match.
func (o *lineOpener) open(line []byte, no int) ([]byte, error) {
	sealed := len(line) > 0 && line[0] == sealedLinePrefix
	if o.c == nil {
		if sealed {
			return nil, fmt.Errorf("%w: the journal is encrypted", ErrEncrypted)
		}
		return line, nil
	}
	if !sealed {
		if json.Valid(line) {
			return nil, fmt.Errorf("%w: the journal is not encrypted", ErrNotEncrypted)
		}
		return nil, errBadLine
	}
	raw, err := base64.RawStdEncoding.AppendDecode(o.buf[:0], line[1:])
	if err != nil {
		return nil, errBadLine
	}
	var ad [8]byte
	binary.BigEndian.PutUint64(ad[:], uint64(no))
	// Opened after the sealed bytes, in the same buffer.
	plain, err := o.c.Open(raw[len(raw):], o.aead, raw, ad[:])
	switch {
	case errors.Is(err, ErrWrongKey):
		return nil, fmt.Errorf("%w: the journal was encrypted under another key", ErrWrongKey)
	case err != nil:
		return nil, errBadLine
	}
	o.buf = raw[:0]
	return plain, nil
}

// readJournalCounting is readJournal that also returns the bytes of the
// lines decoded, newlines included; o opens each line.
func readJournalCounting(r io.Reader, o *lineOpener) (entries []JournalEntry, valid uint64, torn bool, err error) {
	br := bufio.NewReader(r)
	var (
		prevSeq uint64
		pending []byte // the last complete line, not yet known to be final
		pendNo  int
	)
	for lineNo := 1; ; lineNo++ {
		line, rerr := br.ReadBytes('\n')
		if rerr != nil && rerr != io.EOF {
			return nil, 0, false, rerr
		}
		complete := rerr == nil
		if pending != nil {
			// Another line (or a torn tail) follows: pending is a middle
			// line and must decode.
			if len(line) == 0 && !complete {
				break // pending is the final line
			}
			js, oerr := o.open(pending, pendNo)
			if errors.Is(oerr, errBadLine) {
				return nil, 0, false, fmt.Errorf("line %d: %w: %v", pendNo, ErrCorrupt, oerr)
			} else if oerr != nil {
				return nil, 0, false, fmt.Errorf("line %d: %w", pendNo, oerr)
			}
			e, derr := decodeJournalLine(js, prevSeq)
			if derr != nil {
				return nil, 0, false, fmt.Errorf("line %d: %w", pendNo, derr)
			}
			entries = append(entries, e)
			valid += uint64(len(pending)) + 1
			prevSeq = e.Seq
			pending = nil
		}
		if !complete {
			// No trailing newline: a torn write if anything is there.
			return entries, valid, len(line) > 0, nil
		}
		pending, pendNo = line[:len(line)-1], lineNo
	}
	// pending is the final, newline-terminated line. Invalid JSON here, or
	// a sealed line that does not open, is a torn write (e.g. a crash left
	// a zero-filled tail); valid JSON with bad content is corruption.
	js, oerr := o.open(pending, pendNo)
	if errors.Is(oerr, errBadLine) {
		return entries, valid, true, nil
	} else if oerr != nil {
		return nil, 0, false, fmt.Errorf("line %d: %w", pendNo, oerr)
	}
	if !json.Valid(js) {
		return entries, valid, true, nil
	}
	e, derr := decodeJournalLine(js, prevSeq)
	if derr != nil {
		return nil, 0, false, fmt.Errorf("line %d: %w", pendNo, derr)
	}
	return append(entries, e), valid + uint64(len(pending)) + 1, false, nil
}

// decodeJournalLine decodes one line (without its newline) whose seq must
// exceed prevSeq. Every error wraps ErrCorrupt.
func decodeJournalLine(line []byte, prevSeq uint64) (JournalEntry, error) {
	var l journalLine
	if err := json.Unmarshal(line, &l); err != nil {
		return JournalEntry{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	var missing []string
	if l.TS == nil {
		missing = append(missing, "ts")
	}
	if l.Provider == nil {
		missing = append(missing, "provider")
	}
	if l.EventType == nil {
		missing = append(missing, "event_type")
	}
	if l.Seq == nil {
		missing = append(missing, "seq")
	}
	if l.Payload == nil {
		missing = append(missing, "payload")
	}
	if len(missing) > 0 {
		return JournalEntry{}, fmt.Errorf("%w: missing %s", ErrCorrupt, strings.Join(missing, ", "))
	}
	ts, err := time.Parse(time.RFC3339Nano, *l.TS)
	if err != nil {
		return JournalEntry{}, fmt.Errorf("%w: ts: %v", ErrCorrupt, err)
	}
	if *l.Seq <= prevSeq {
		return JournalEntry{}, fmt.Errorf("%w: seq %d after %d, want strictly increasing from 1", ErrCorrupt, *l.Seq, prevSeq)
	}
	return JournalEntry{
		TS:        ts.UTC(),
		Provider:  *l.Provider,
		EventType: *l.EventType,
		Seq:       *l.Seq,
		Payload:   l.Payload,
		Text:      l.Text,
	}, nil
}

// ListJournals returns the steps that have a journal file in dir, in id
// order, for the startup reconciler. Files that are not named
// {step_id}.jsonl are ignored; a missing dir holds no journals.
func ListJournals(dir string) ([]messages.StepID, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list journals: %w", err)
	}
	var steps []messages.StepID
	for _, de := range des {
		name := de.Name()
		stem, ok := strings.CutSuffix(name, journalExt)
		if !ok || !de.Type().IsRegular() {
			continue
		}
		step, err := messages.ParseID[messages.StepID](stem)
		// Only the canonical spelling is the file JournalPath names.
		if err != nil || step.IsZero() || step.String() != stem {
			continue
		}
		steps = append(steps, step)
	}
	return steps, nil
}
