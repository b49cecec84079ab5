package export

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/contextinfinity/ctxinf/messages"
)

// ReadOptions bound what a Reader accepts, as the requests an export
// stands for are bounded (a server passes its own limits). A zero limit
// is none.
type ReadOptions struct {
	// MaxLineBytes is the longest line read: a longer one is a
	// *LineTooLongError, and no line longer is ever held.
	MaxLineBytes int
	// MaxTitleBytes bounds the session's title, MaxLabelBytes a
	// branch's label, MaxPinBytes a pinned fact (the runtime's
	// context.max_pin_bytes).
	MaxTitleBytes int
	MaxLabelBytes int
	MaxPinBytes   int
	// JSONProblem words what is wrong with a line's JSON, err as
	// encoding/json decoding it into v returned it; nil words it as err
	// does.
	JSONProblem func(err error, v any) string
}

// InvalidError is an export a Reader refuses: Message says where (the
// line) and what is wrong, in the words of the HTTP API's errors.
type InvalidError struct{ Message string }

func (e *InvalidError) Error() string { return "export: " + e.Message }

// LineTooLongError is a line over ReadOptions.MaxLineBytes.
type LineTooLongError struct{ Line, Limit int }

func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("export: line %d: over the limit of %d bytes for a line", e.Line, e.Limit)
}

func invalid(format string, args ...any) error {
	return &InvalidError{Message: fmt.Sprintf(format, args...)}
}

// Reader reads an export (either format) as the items Writer writes:
// the session line first (Session), then each item (Next) checked as the
// requests it stands for are, and the end line checked against the
// counts and the SHA-256 of the lines before it. It holds one line at a
// time. A format-1 export (a session line, then the active branch's
// messages) reads as one branch, "main", its turns (a user message and
// the assistant messages after it) and its head; it has no states.
type Reader struct {
	o      ReadOptions
	br     *bufio.Reader
	buf    []byte
	n      int // lines read
	sum    hash.Hash
	before []byte // the hash of the lines before the last one read

	session SessionLine
	read    bool  // the session line is read
	headErr error // what is wrong with it
	err     error // Next's last error: the end (io.EOF), or why it stopped
	// Counts of what was read, for the end line; headDone: the last
	// branch's head line was read (or no branch was begun).
	branches, turns, states int
	headDone                bool
	active                  int
	// The item last returned: its line and the bytes of its lines.
	line, size int
	// Format 1: the turn being read (its assistant messages are those
	// up to the next user message), and where the reading is.
	v1     *Turn
	v1Size int
	v1Step int // 0: the branch is next, 1: messages, 2: the head is next
}

// NewReader returns a Reader of the export r holds.
func NewReader(r io.Reader, o ReadOptions) *Reader {
	return &Reader{o: o, br: bufio.NewReaderSize(r, 64<<10), sum: sha256.New(), headDone: true}
}

// Session reads and checks the session line (if Next has not), and
// returns it. Its Format is 0 for format 1.
func (x *Reader) Session() (SessionLine, error) {
	if !x.read {
		x.read = true
		x.headErr = x.readSession()
	}
	return x.session, x.headErr
}

func (x *Reader) readSession() error {
	line, err := x.next()
	if errors.Is(err, io.EOF) {
		return invalid("the export is empty")
	}
	if err != nil {
		return err
	}
	h := &x.session
	if err := json.Unmarshal(line, h); err != nil {
		return invalid("line 1: %s", x.problem(err, h))
	}
	if h.Type != "session" {
		return invalid("line 1: type %q: want session", h.Type)
	}
	if x.o.MaxTitleBytes > 0 && len(h.Title) > x.o.MaxTitleBytes {
		return invalid("line 1: title: %d bytes, limit %d", len(h.Title), x.o.MaxTitleBytes)
	}
	if h.Format != 0 && h.Format != Format {
		return invalid("line 1: format %d: want %d (or none, format 1)", h.Format, Format)
	}
	return nil
}

// Next returns the next item, checked; io.EOF once the export has ended
// whole (format 2: its end line checked, and nothing after it). An
// export cut short, changed, or holding what its requests would be
// refused is an *InvalidError naming the line.
func (x *Reader) Next() (Item, error) {
	if _, err := x.Session(); err != nil {
		return Item{}, err
	}
	if x.err != nil {
		return Item{}, x.err
	}
	var it Item
	var err error
	if x.session.Format == 0 {
		it, err = x.nextV1()
	} else {
		it, err = x.nextV2()
	}
	if err != nil {
		x.err = err
	}
	return it, err
}

// Line is the line of the item Next returned last: format 1's turn ends
// at the line after its last message.
func (x *Reader) Line() int { return x.line }

// Size is the bytes of the lines the item Next returned last was read
// from.
func (x *Reader) Size() int { return x.size }

// ActiveBranch is the index of the session's active branch, once Next
// has returned io.EOF (format 1: its one branch).
func (x *Reader) ActiveBranch() int { return x.active }

func (x *Reader) item(it Item, size int) (Item, error) {
	x.line, x.size = x.n, size
	return it, nil
}

func (x *Reader) nextV2() (Item, error) {
	for {
		line, err := x.next()
		if errors.Is(err, io.EOF) {
			return Item{}, invalid("the export ends at line %d without its end line: it was cut short", x.n)
		}
		if err != nil {
			return Item{}, err
		}
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		n := x.n
		var kind struct{ Type string }
		if err := json.Unmarshal(line, &kind); err != nil {
			return Item{}, invalid("line %d: %s", n, x.problem(err, &kind))
		}
		strict := func(v any) error {
			d := json.NewDecoder(strings.NewReader(string(line)))
			d.DisallowUnknownFields()
			if err := d.Decode(v); err != nil {
				return invalid("line %d: %s: %s", n, kind.Type, x.problem(err, v))
			}
			return nil
		}
		if kind.Type != "branch" && kind.Type != "end" && x.headDone {
			return Item{}, invalid("line %d: type %s: want a branch line first", n, kind.Type)
		}
		switch kind.Type {
		case "branch":
			var l BranchLine
			if err := strict(&l); err != nil {
				return Item{}, err
			}
			if !x.headDone {
				return Item{}, invalid("line %d: branch: the branch before it has no head line", n)
			}
			if x.o.MaxLabelBytes > 0 && len(l.Label) > x.o.MaxLabelBytes {
				return Item{}, invalid("line %d: label: %d bytes, limit %d", n, len(l.Label), x.o.MaxLabelBytes)
			}
			if err := x.checkPins(n, "base.pinned", l.Base.Pinned); err != nil {
				return Item{}, err
			}
			x.headDone = false
			x.branches++
			return x.item(Item{Branch: &Branch{Label: l.Label, Created: l.Created, Parent: l.Parent,
				ForkAtDepth: l.ForkAtDepth, TipDepth: l.TipDepth, ForkSeq: l.ForkSeq, Base: l.Base.State(),
				Carried: l.Carried}}, len(line))
		case "turn":
			var l TurnLine
			if err := strict(&l); err != nil {
				return Item{}, err
			}
			t := Turn{Seq: l.Seq}
			switch {
			case l.User == nil:
				return Item{}, invalid("line %d: user: required", n)
			case (l.Reply == nil) == (l.Failed == nil):
				return Item{}, invalid("line %d: a turn has a reply or failed, one of them", n)
			case l.Failed != nil && l.Failed.Reason == "":
				return Item{}, invalid("line %d: failed.reason: required", n)
			}
			t.User = *l.User
			if l.Failed != nil {
				t.Failed, t.Code, t.Reason = true, l.Failed.Code, l.Failed.Reason
			} else {
				t.Reply = *l.Reply
			}
			x.turns++
			return x.item(Item{Turn: &t}, len(line))
		case "state":
			var l StateLine
			if err := strict(&l); err != nil {
				return Item{}, err
			}
			if err := x.checkPins(n, "pinned", l.Pinned); err != nil {
				return Item{}, err
			}
			st := l.State()
			x.states++
			return x.item(Item{State: &st}, len(line))
		case "head":
			var l HeadLine
			if err := strict(&l); err != nil {
				return Item{}, err
			}
			if err := x.checkPins(n, "pinned", l.Pinned); err != nil {
				return Item{}, err
			}
			x.headDone = true
			return x.item(Item{Head: &Head{Pinned: l.Pinned, Model: l.Model, MemoryTools: l.MemoryTools}}, len(line))
		case "end":
			var l EndLine
			if err := strict(&l); err != nil {
				return Item{}, err
			}
			sum := hex.EncodeToString(x.before)
			switch {
			case !x.headDone:
				return Item{}, invalid("line %d: end: the last branch has no head line", n)
			case l.SHA256 != sum:
				return Item{}, invalid("line %d: sha256: %q, the lines before it give %q: the export was changed or cut", n, l.SHA256, sum)
			case l.Branches != x.branches || l.Turns != x.turns || l.States != x.states:
				return Item{}, invalid("line %d: end: %d branches, %d turns and %d states, the export has %d, %d and %d",
					n, l.Branches, l.Turns, l.States, x.branches, x.turns, x.states)
			case l.ActiveBranch < 0 || l.ActiveBranch >= x.branches:
				return Item{}, invalid("line %d: active_branch: %d, want 0 to %d", n, l.ActiveBranch, x.branches-1)
			}
			if _, err := x.next(); !errors.Is(err, io.EOF) {
				if err == nil {
					err = invalid("line %d: a line after the end line", x.n)
				}
				return Item{}, err
			}
			x.active = l.ActiveBranch
			return Item{}, io.EOF
		default:
			return Item{}, invalid("line %d: type %q: want branch, turn, state, head or end", n, kind.Type)
		}
	}
}

// nextV1 reads format 1: the branch, then a turn per user message and
// the assistant messages after it, then the head.
func (x *Reader) nextV1() (Item, error) {
	switch x.v1Step {
	case 0:
		x.v1Step = 1
		x.branches++
		return x.item(Item{Branch: &Branch{Label: "main", Parent: -1}}, 0)
	case 2:
		x.v1Step = 3
		if x.turns == 0 {
			return Item{}, invalid("no user message to import")
		}
		return x.item(Item{Head: &Head{}}, 0)
	case 3:
		return Item{}, io.EOF
	}
	for {
		line, err := x.next()
		if errors.Is(err, io.EOF) {
			x.v1Step = 2
			if t := x.v1; t != nil {
				x.v1 = nil
				return x.item(Item{Turn: t}, x.v1Size)
			}
			return x.nextV1()
		}
		if err != nil {
			return Item{}, err
		}
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var l V1Line
		if err := json.Unmarshal(line, &l); err != nil {
			return Item{}, invalid("line %d: %s", x.n, x.problem(err, &l))
		}
		switch {
		case l.Type == "message" && l.Message != nil && l.Message.Role == messages.RoleUser:
			done, size := x.v1, x.v1Size
			x.turns++
			x.v1 = &Turn{Seq: uint64(x.turns), User: *l.Message, Reply: messages.NewMessage(messages.RoleAssistant)}
			x.v1Size = len(line)
			if done != nil {
				return x.item(Item{Turn: done}, size)
			}
		case l.Type == "message" && l.Message != nil && l.Message.Role == messages.RoleAssistant:
			if x.v1 == nil {
				return Item{}, invalid("line %d: an assistant message before any user message", x.n)
			}
			x.v1.Reply.Blocks = append(x.v1.Reply.Blocks, l.Message.Blocks...)
			x.v1.Reply.RenderedText += l.Message.RenderedText
			x.v1Size += len(line)
		default:
			return Item{}, invalid("line %d: type %q: want message (with a user or assistant message)", x.n, l.Type)
		}
	}
}

// checkPins refuses a pinned fact over MaxPinBytes, as pinning does.
func (x *Reader) checkPins(line int, field string, pins []string) error {
	if x.o.MaxPinBytes <= 0 {
		return nil
	}
	for i, p := range pins {
		if len(p) > x.o.MaxPinBytes {
			return invalid("line %d: %s[%d]: %d bytes, limit %d (context.max_pin_bytes)", line, field, i, len(p), x.o.MaxPinBytes)
		}
	}
	return nil
}

func (x *Reader) problem(err error, v any) string {
	if x.o.JSONProblem != nil {
		return x.o.JSONProblem(err, v)
	}
	return err.Error()
}

// next reads a line of at most MaxLineBytes and hashes it; before is
// then the hash of the lines before it.
func (x *Reader) next() ([]byte, error) {
	x.before = x.sum.Sum(x.before[:0])
	x.buf = x.buf[:0]
	for {
		chunk, err := x.br.ReadSlice('\n')
		if x.o.MaxLineBytes > 0 && len(x.buf)+len(chunk) > x.o.MaxLineBytes {
			return nil, &LineTooLongError{Line: x.n + 1, Limit: x.o.MaxLineBytes}
		}
		x.buf = append(x.buf, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(x.buf) > 0:
		case err != nil:
			return nil, err
		}
		x.n++
		x.sum.Write(x.buf)
		return x.buf, nil
	}
}
