package export

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"io"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// Writer writes a session's export to an io.Writer: the session line
// before the first item, a line per item, and the end line (Close).
type Writer struct {
	enc     *json.Encoder
	sum     hash.Hash
	session SessionLine
	active  messages.BranchID
	end     EndLine
	started bool
}

// NewWriter returns a Writer of the export of a session titled title,
// created at created, whose active branch is active, to w.
func NewWriter(w io.Writer, title string, created time.Time, active messages.BranchID) *Writer {
	sum := sha256.New()
	return &Writer{enc: json.NewEncoder(io.MultiWriter(w, sum)), sum: sum, active: active,
		session: SessionLine{Type: "session", Format: Format, Title: title, Created: created},
		end:     EndLine{Type: "end", ActiveBranch: -1}}
}

// Started reports whether a line was written.
func (x *Writer) Started() bool { return x.started }

func (x *Writer) start() error {
	if x.started {
		return nil
	}
	x.started = true
	return x.enc.Encode(x.session)
}

// Write writes it's line (and the session line before the first).
func (x *Writer) Write(it Item) error {
	if err := x.start(); err != nil {
		return err
	}
	switch {
	case it.Branch != nil:
		b := it.Branch
		if b.ID == x.active {
			x.end.ActiveBranch = x.end.Branches
		}
		x.end.Branches++
		return x.enc.Encode(BranchLine{Type: "branch", Label: b.Label, Created: b.Created, Parent: b.Parent,
			ForkAtDepth: b.ForkAtDepth, TipDepth: b.TipDepth, ForkSeq: b.ForkSeq, Base: FromState(b.Base), Carried: b.Carried})
	case it.Turn != nil:
		t := it.Turn
		x.end.Turns++
		l := TurnLine{Type: "turn", Seq: t.Seq, User: &t.User}
		if t.Failed {
			l.Failed = &Failure{Code: t.Code, Reason: t.Reason}
		} else {
			l.Reply = &t.Reply
		}
		return x.enc.Encode(l)
	case it.State != nil:
		x.end.States++
		return x.enc.Encode(StateLine{Type: "state", StateFields: FromState(*it.State)})
	case it.Head != nil:
		return x.enc.Encode(HeadLine{Type: "head", Pinned: it.Head.Pinned, Model: it.Head.Model, MemoryTools: it.Head.MemoryTools})
	}
	return nil
}

// Close writes the end line (and the session line, if no item was
// written): the counts, the active branch's index and the SHA-256 of
// the lines before it. It does not close the io.Writer.
func (x *Writer) Close() error {
	if err := x.start(); err != nil {
		return err
	}
	x.end.SHA256 = hex.EncodeToString(x.sum.Sum(nil))
	return x.enc.Encode(x.end)
}
