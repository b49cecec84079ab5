package actors

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"sync"
	"unsafe"

	"github.com/contextinfinity/ctxinf/messages"
)

// contextHash is the SHA-256 of an assembled context's JSON, hex.
func contextHash(ac messages.AssembledContext) string {
	data, err := json.Marshal(ac)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// contextHasher is contextHash for the contexts of one branch, with the
// JSON of the last context's messages kept: a window moves on a turn at
// a time, so most of a context's messages were in the one before, and
// encoding them is most of the hash's cost (BenchmarkContextHash). The
// bytes hashed are json.Marshal's (TestContextJSONMatchesMarshal). It
// is safe for concurrent use.
type contextHasher struct {
	mu   sync.Mutex
	last map[msgKey]msgJSON // the messages of the last context hashed
}

// msgKey identifies a message by its backing arrays. Messages are
// values that are never changed in place once made (the branch keeps
// them, and steps and contexts copy them), so the same arrays mean the
// same message; an entry holds its message, so that its arrays cannot
// be freed and reused for another while it is kept.
type msgKey struct {
	blocks  *messages.ContentBlock
	nblocks int
	text    *byte
	ntext   int
	role    messages.Role
}

type msgJSON struct {
	m    messages.Message
	data []byte
}

func keyOf(m messages.Message) msgKey {
	return msgKey{blocks: unsafe.SliceData(m.Blocks), nblocks: len(m.Blocks),
		text: unsafe.StringData(m.RenderedText), ntext: len(m.RenderedText), role: m.Role}
}

// hash is contextHash(ac).
func (h *contextHasher) hash(ac messages.AssembledContext) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	next := make(map[msgKey]msgJSON, len(ac.Window)+len(ac.Pending)+1)
	sum := sha256.New()
	err := contextJSON(sum, ac, func(m messages.Message) ([]byte, error) {
		k := keyOf(m)
		e, ok := h.last[k]
		if !ok {
			b, err := json.Marshal(m)
			if err != nil {
				return nil, err
			}
			e = msgJSON{m: m, data: b}
		}
		next[k] = e
		return e.data, nil
	})
	h.last = next
	if err != nil {
		return ""
	}
	return hex.EncodeToString(sum.Sum(nil))
}

// contextJSON writes to w the bytes json.Marshal(ac) returns, with each
// message encoded by msg (json.Marshal's bytes for it) and every other
// field by json.Marshal: encoding/json writes a struct as its fields'
// encodings in order, leaving out the empty ones tagged omitempty.
func contextJSON(w io.Writer, ac messages.AssembledContext, msg func(messages.Message) ([]byte, error)) error {
	var err error
	write := func(parts ...[]byte) {
		for _, p := range parts {
			if err == nil {
				_, err = w.Write(p)
			}
		}
	}
	field := func(name string, v any) {
		if err != nil {
			return
		}
		var data []byte
		if data, err = json.Marshal(v); err == nil {
			write([]byte(name), data)
		}
	}
	list := func(name string, ms []messages.Message) {
		if err != nil || len(ms) == 0 {
			return
		}
		write([]byte(name))
		for i, m := range ms {
			var data []byte
			if data, err = msg(m); err != nil {
				return
			}
			if i > 0 {
				write(comma)
			}
			write(data)
		}
		write(closeList)
	}
	field(`{"system_instructions":`, ac.SystemInstructions)
	if len(ac.PinnedFacts) > 0 {
		field(`,"pinned_facts":`, ac.PinnedFacts)
	}
	if ac.Summary != "" {
		field(`,"summary":`, ac.Summary)
	}
	list(`,"window":[`, ac.Window)
	list(`,"pending":[`, ac.Pending)
	if len(ac.Retrieved) > 0 {
		field(`,"retrieved":`, ac.Retrieved)
	}
	if err == nil {
		var data []byte
		if data, err = msg(ac.User); err == nil {
			write([]byte(`,"user":`), data)
		}
	}
	if len(ac.Continuation) > 0 {
		field(`,"continuation":`, ac.Continuation)
	}
	if len(ac.Tools) > 0 {
		field(`,"tools":`, ac.Tools)
	}
	if ac.ToolMode != "" {
		field(`,"tool_mode":`, ac.ToolMode)
	}
	write(closeObject)
	return err
}

var comma, closeList, closeObject = []byte(","), []byte("]"), []byte("}")
