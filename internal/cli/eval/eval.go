package eval

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/internal/retrieval"
	"github.com/contextinfinity/ctxinf/internal/wiring"
	"github.com/contextinfinity/ctxinf/messages"
)

// Serve is `ctxinf-bench eval serve [--data-dir D]`: a retriever speaking
// the ctxeval/1 JSON-lines protocol (../shared/eval/locomo-eval) on
// stdin and stdout, through the product's own paths. Each conversation
// is a session; each appended utterance a turn on its branch (imported:
// the user message is the utterance, rendered with its speaker and date,
// and carrying them as its Speaker and Time; the reply empty); flush
// folds and indexes everything (Runtime.Settle); query runs the hybrid
// retrieval and answers with the source turns' ids; fork forks the
// branch at a turn.
func Serve(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("eval serve", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	dataDir := fs.String("data-dir", "", "data directory (default: a fresh temporary one, removed at the end)")
	batch := fs.Int("batch", 64, "appends imported together (one durable write)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole session to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		stop, err := cli.StartCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if *batch < 1 || *batch > actors.MaxImport {
		return fmt.Errorf("eval serve: --batch %d, want 1 to %d", *batch, actors.MaxImport)
	}
	s, done, err := openEval(e, *dataDir, *batch)
	if err != nil {
		return err
	}
	defer done()
	return s.serve(context.Background(), e.Stdin, e.Stdout)
}

// openEval opens the runtime of an evaluation on data directory dataDir
// (a fresh temporary one when empty, removed by done) with e's
// configuration, on the offline local provider.
func openEval(e *cli.Env, dataDir string, batch int) (s *evalServer, done func(), err error) {
	return openEvalWith(e, dataDir, batch, nil)
}

// openEvalWith is openEval with the runtime's configuration changed by
// edit, if not nil, before the runtime opens.
func openEvalWith(e *cli.Env, dataDir string, batch int, edit func(*actors.Config)) (s *evalServer, done func(), err error) {
	path, rm, err := cli.WorkDir(dataDir, "ctxinf-eval-")
	if err != nil {
		return nil, nil, err
	}
	if dataDir == "" {
		path = filepath.Join(path, "data")
	}
	e.Log = e.Log.Level(max(e.Log.GetLevel(), zerolog.WarnLevel))
	e.Config.DataDir = path
	e.Config.DefaultModel = ""
	cfg, err := e.RuntimeConfig()
	if err != nil {
		rm()
		return nil, nil, err
	}
	// Load the token counter's encoding before the first conversation
	// rather than in its first fold (it is counted into flush otherwise).
	cfg.Counter(cfg.Provider.Name(), cfg.Model)("warm up")
	if edit != nil {
		edit(&cfg)
	}
	rt, err := ctxinf.Open(context.Background(), ctxinf.Options{Config: &cfg})
	if err != nil {
		rm()
		return nil, nil, err
	}
	s = &evalServer{rt: rt, batch: batch, count: cfg.Counter(cfg.Provider.Name(), cfg.Model), convs: map[string]*evalConv{}, opts: wiring.RankOptions(e.Config.Retrieval), version: e.Version}
	return s, func() { rt.Close(); rm() }, nil
}

// evalConv is a conversation of the protocol: a branch, the utterances
// not yet imported, and the turn ids both ways.
type evalConv struct {
	branch  messages.BranchID
	pending []actors.Exchange
	ids     []string // of pending
	byTurn  map[messages.TurnID]string
	turnOf  map[string]messages.PendingTurn
}

type evalServer struct {
	rt    *ctxinf.Runtime
	batch int
	convs map[string]*evalConv
	opts  retrieval.RankOptions
	// count is the token counter of the runtime's model.
	count core.Counter
	// version is the binary's, which hello names.
	version string
}

type evalRequest struct {
	Op       string            `json:"op"`
	Protocol string            `json:"protocol"`
	Conv     string            `json:"conv"`
	ID       string            `json:"id"`
	Seq      int               `json:"seq"`
	Speaker  string            `json:"speaker"`
	Text     string            `json:"text"`
	TS       string            `json:"ts"`
	Meta     map[string]string `json:"meta"`
	QID      string            `json:"qid"`
	Q        string            `json:"q"`
	K        int               `json:"k"`
	From     string            `json:"from"`
	At       string            `json:"at"`
}

func (s *evalServer) serve(ctx context.Context, in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	w := bufio.NewWriter(out)
	defer w.Flush()
	enc := json.NewEncoder(w)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var req evalRequest
		var resp any
		if err := json.Unmarshal([]byte(line), &req); err != nil {
			resp = map[string]string{"error": "bad request: " + err.Error()}
		} else {
			var err error
			resp, err = s.handle(ctx, req)
			if err != nil {
				resp = map[string]string{"error": err.Error()}
			}
		}
		if err := enc.Encode(resp); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if req.Op == "close" {
			return nil
		}
	}
	return sc.Err()
}

var evalOK = map[string]bool{"ok": true}

func (s *evalServer) handle(ctx context.Context, req evalRequest) (any, error) {
	switch req.Op {
	case "hello":
		if req.Protocol != "" && req.Protocol != "ctxeval/1" {
			return nil, fmt.Errorf("protocol %q: want ctxeval/1", req.Protocol)
		}
		return map[string]any{"ok": true, "name": "ctxinf/" + s.version, "caps": []string{"fork"}}, nil
	case "append":
		c, err := s.conv(ctx, req.Conv, true)
		if err != nil {
			return nil, err
		}
		if req.ID == "" {
			return nil, errors.New("append: id is required")
		}
		if _, dup := c.turnOf[req.ID]; dup || slices.Contains(c.ids, req.ID) {
			return nil, fmt.Errorf("append: id %q is appended already", req.ID)
		}
		user := messages.NewMessage(messages.RoleUser, messages.Text{Text: renderUtterance(req)})
		// Who said it and when, as the import format carries them: the
		// protocol's speaker and ts (its session's time, for LoCoMo).
		user.Speaker = req.Speaker
		if req.TS != "" {
			if user.Time, err = time.Parse(time.RFC3339, req.TS); err != nil {
				return nil, fmt.Errorf("append: ts: %q is not an RFC 3339 time", req.TS)
			}
		}
		c.pending = append(c.pending, actors.Exchange{User: user, Reply: messages.NewMessage(messages.RoleAssistant)})
		c.ids = append(c.ids, req.ID)
		if len(c.pending) >= s.batch {
			if err := s.importPending(ctx, c); err != nil {
				return nil, err
			}
		}
		return evalOK, nil
	case "flush":
		c, err := s.conv(ctx, req.Conv, false)
		if err != nil {
			return nil, err
		}
		if err := s.settle(ctx, c); err != nil {
			return nil, err
		}
		return evalOK, nil
	case "query":
		return s.query(ctx, req)
	case "fork":
		return s.fork(ctx, req)
	case "close":
		return evalOK, nil
	}
	return nil, fmt.Errorf("unknown op %q", req.Op)
}

// renderUtterance is the user message an utterance becomes: its date
// (the session's), its speaker, its text, and the caption of an image it
// shares.
func renderUtterance(req evalRequest) string {
	var b strings.Builder
	if d := req.Meta["session_date"]; d != "" {
		fmt.Fprintf(&b, "[%s] ", d)
	} else if t, err := time.Parse(time.RFC3339, req.TS); err == nil {
		fmt.Fprintf(&b, "[%s] ", t.Format("2 January 2006"))
	}
	if req.Speaker != "" {
		b.WriteString(req.Speaker + ": ")
	}
	b.WriteString(req.Text)
	if c := req.Meta["blip_caption"]; c != "" {
		fmt.Fprintf(&b, " [shares a photo: %s]", c)
	}
	return b.String()
}

// conv returns conversation name, creating its session when create.
func (s *evalServer) conv(ctx context.Context, name string, create bool) (*evalConv, error) {
	if name == "" {
		return nil, errors.New("conv is required")
	}
	if c, ok := s.convs[name]; ok {
		return c, nil
	}
	if !create {
		return nil, fmt.Errorf("conv %q: nothing appended to it", name)
	}
	_, b, err := s.rt.CreateSession(ctx, name)
	if err != nil {
		return nil, err
	}
	c := &evalConv{branch: b.ID, byTurn: map[messages.TurnID]string{}, turnOf: map[string]messages.PendingTurn{}}
	s.convs[name] = c
	return c, nil
}

func (s *evalServer) importPending(ctx context.Context, c *evalConv) error {
	if len(c.pending) == 0 {
		return nil
	}
	ids, err := s.rt.Import(ctx, c.branch, c.pending)
	if err != nil {
		return err
	}
	for i, t := range ids {
		c.byTurn[t.Turn], c.turnOf[c.ids[i]] = c.ids[i], t
	}
	c.pending, c.ids = c.pending[:0], c.ids[:0]
	return nil
}

func (s *evalServer) settle(ctx context.Context, c *evalConv) error {
	if err := s.importPending(ctx, c); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return s.rt.Settle(ctx, c.branch)
}

// query answers with the ids of the best hits' source turns, each once,
// at most k.
func (s *evalServer) query(ctx context.Context, req evalRequest) (any, error) {
	c, err := s.conv(ctx, req.Conv, false)
	if err != nil {
		return nil, err
	}
	if len(c.pending) > 0 {
		if err := s.settle(ctx, c); err != nil {
			return nil, err
		}
	}
	if req.K < 1 || req.K > 100 {
		return nil, fmt.Errorf("query: k %d, want 1 to 100", req.K)
	}
	ids, scores, err := s.rank(ctx, c, req.Q, req.K)
	if err != nil {
		return nil, err
	}
	return map[string]any{"qid": req.QID, "ids": ids, "scores": scores}, nil
}

// rank runs the hybrid search of conversation c for q and returns the
// protocol ids of the best hits' source turns, each once, at most k.
func (s *evalServer) rank(ctx context.Context, c *evalConv, q string, k int) (ids []string, scores []float64, err error) {
	opts := s.opts
	opts.TopK, opts.MaxK = 2*k, 0 // a turn may have several chunks
	opts.Overfetch = max(opts.Overfetch, 4*k)
	hits, err := s.rt.Search(ctx, c.branch, q, &opts)
	if err != nil {
		return nil, nil, err
	}
	ids, scores = []string{}, []float64{}
	seen := map[string]bool{}
	for _, h := range hits {
		id, ok := s.idOf(h.Chunk.SourceTurn)
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		ids, scores = append(ids, id), append(scores, h.Score)
		if len(ids) == k {
			break
		}
	}
	return ids, scores, nil
}

// idOf finds the protocol id of a turn in any conversation (a fork's
// hits include its parent's turns).
func (s *evalServer) idOf(t messages.TurnID) (string, bool) {
	for _, c := range s.convs {
		if id, ok := c.byTurn[t]; ok {
			return id, true
		}
	}
	return "", false
}

// fork makes conversation req.Conv a fork of req.From after turn req.At
// (its reply: the whole exchange is on the fork).
func (s *evalServer) fork(ctx context.Context, req evalRequest) (any, error) {
	if _, ok := s.convs[req.Conv]; ok || req.Conv == "" {
		return nil, fmt.Errorf("fork: conv %q exists already or is empty", req.Conv)
	}
	from, err := s.conv(ctx, req.From, false)
	if err != nil {
		return nil, err
	}
	if err := s.importPending(ctx, from); err != nil {
		return nil, err
	}
	t, ok := from.turnOf[req.At]
	if !ok {
		return nil, fmt.Errorf("fork: turn %q is not in conv %q", req.At, req.From)
	}
	b, err := s.rt.Fork(ctx, from.branch, t.Reply, req.Conv)
	if err != nil {
		return nil, err
	}
	s.convs[req.Conv] = &evalConv{branch: b.ID, byTurn: map[messages.TurnID]string{}, turnOf: map[string]messages.PendingTurn{}}
	return evalOK, nil
}
