package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
)

// drain is the stdin and stdout of `ctxinf mcp` as its transport sees
// them. The end of stdin is held back until every request read before it
// has had its response written: a client that writes its requests and
// closes stdin (a script: printf … | ctxinf mcp) gets every answer,
// rather than a session closed under the requests still queued.
type drain struct {
	in  io.Reader
	out io.Writer

	mu      sync.Mutex
	cond    *sync.Cond
	pending map[string]bool // the ids of the requests read and not yet answered
	eof     error           // stdin's end, once read, returned on the next Read
	inLine  []byte          // the incomplete line read last
	outLine []byte          // the incomplete line written last
}

func newDrain(in io.Reader, out io.Writer) *drain {
	d := &drain{in: in, out: out, pending: map[string]bool{}}
	d.cond = sync.NewCond(&d.mu)
	return d
}

// Read reads stdin; at its end, it waits for the responses first.
func (d *drain) Read(p []byte) (int, error) {
	if d.eof != nil {
		d.mu.Lock()
		for len(d.pending) > 0 {
			d.cond.Wait()
		}
		d.mu.Unlock()
		return 0, d.eof
	}
	n, err := d.in.Read(p)
	d.mu.Lock()
	d.inLine = lines(d.inLine, p[:n], func(m message) {
		if m.Method != "" && len(m.ID) > 0 {
			d.pending[string(m.ID)] = true
		}
	})
	d.mu.Unlock()
	if err != nil {
		d.eof = err
		if n > 0 {
			return n, nil // the data first: the requests it holds are then read
		}
		return d.Read(p)
	}
	return n, nil
}

// Write writes stdout, noting the responses it carries.
func (d *drain) Write(p []byte) (int, error) {
	n, err := d.out.Write(p)
	d.mu.Lock()
	d.outLine = lines(d.outLine, p[:n], func(m message) {
		if m.Method == "" && len(m.ID) > 0 {
			delete(d.pending, string(m.ID))
		}
	})
	d.cond.Broadcast()
	d.mu.Unlock()
	return n, err
}

// Close closes nothing: stdout outlives the session.
func (d *drain) Close() error { return nil }

// message is what drain reads of a JSON-RPC message: its id (compacted)
// and method; a request has both, a response an id alone.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// lines appends data to the incomplete line line, calls fn with the
// messages of each complete line (a message, or a batch of them), and
// returns what is left incomplete.
func lines(line, data []byte, fn func(message)) []byte {
	line = append(line, data...)
	for {
		i := bytes.IndexByte(line, '\n')
		if i < 0 {
			return line
		}
		l := bytes.TrimSpace(line[:i])
		line = line[i+1:]
		var batch []message
		if len(l) > 0 && l[0] == '[' {
			_ = json.Unmarshal(l, &batch)
		} else {
			var m message
			if json.Unmarshal(l, &m) == nil {
				batch = []message{m}
			}
		}
		for _, m := range batch {
			var c bytes.Buffer
			if len(m.ID) > 0 && json.Compact(&c, m.ID) == nil && c.String() != "null" {
				m.ID = c.Bytes()
				fn(m)
			}
		}
	}
}
