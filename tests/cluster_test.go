package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/pgtest"
	"github.com/contextinfinity/ctxinf/messages"
)

// clusterMember is one `ctxinf serve --cluster` process of a test's
// cluster: its ports and data directory stay the same across restarts.
type clusterMember struct {
	dir, addr string
	env       []string
	s         *server
}

func (m *clusterMember) start(t *testing.T) error {
	s, err := launchServe(t, m.dir, m.addr, []string{"--cluster"}, io.Discard, m.env...)
	if err == nil {
		m.s = s
	}
	return err
}

func (m *clusterMember) url() string { return "http://" + m.addr }

// startCluster starts n members sharing the PostgreSQL database at pg.
func startCluster(t *testing.T, pg string, n int, extra ...string) []*clusterMember {
	t.Helper()
	manage := make([]int, n)
	peers := make([]string, n)
	for i := range n {
		manage[i] = freePort(t)
		peers[i] = "127.0.0.1:" + strconv.Itoa(manage[i])
	}
	ms := make([]*clusterMember, n)
	for i := range n {
		ms[i] = &clusterMember{dir: t.TempDir(), addr: "127.0.0.1:" + strconv.Itoa(freePort(t)),
			env: append([]string{"CTX_STORE_BACKEND=postgres", "CTX_STORE_POSTGRES_URL=" + pg,
				"CTX_CLUSTER_PORT=" + strconv.Itoa(freePort(t)), "CTX_CLUSTER_MANAGE_PORT=" + strconv.Itoa(manage[i]),
				"CTX_CLUSTER_PEERS=" + strings.Join(peers, ","), "CTX_CLUSTER_REFRESH=250ms", "CTX_CLUSTER_JOIN_TIMEOUT=20s"},
				extra...)}
	}
	for _, m := range ms {
		if err := m.start(t); err != nil {
			t.Fatal(err)
		}
	}
	return ms
}

// metric returns the value of an unlabelled counter or gauge in a
// member's /metrics (0 if it is not there).
func metric(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// ack is a turn a member acknowledged: its reply came back finalized.
type ack struct {
	turn messages.TurnID
	text string
}

// TestClusterSurvivesMemberKills starts three `ctxinf serve --cluster`
// members on one PostgreSQL database, drives 200 branches through all
// three members' HTTP APIs while a member is SIGKILLed and restarted
// five times, and checks that every acknowledged turn is in its
// branch's history exactly once, that nothing is there twice, and that
// every branch answers through every member; then that a proxied
// conversation goes on through whichever member gets its next request.
// It reports the writes the
// store refused because their head had moved (a stale activation's
// commits) and the requests members forwarded.
func TestClusterSurvivesMemberKills(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	ms := startCluster(t, pg, 3, "CTX_LOCAL_DELAY=1ms")
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)) // the chaos goroutine's
	const nBranches = 200
	clients := func() []*client.Client {
		cs := make([]*client.Client, len(ms))
		for i, m := range ms {
			cs[i] = client.New(m.url())
		}
		return cs
	}()
	// retry runs f through one member after another until it succeeds
	// or a minute passes: a member may be down, or the cluster moving.
	retry := func(what string, f func(c *client.Client) error) error {
		deadline := time.Now().Add(time.Minute)
		var err error
		for i := 0; time.Now().Before(deadline); i++ {
			if err = f(clients[(i+rand.IntN(len(clients)))%len(clients)]); err == nil {
				return nil
			}
			var te *client.TurnError
			if errors.As(err, &te) {
				return err // the turn ended and failed: the caller decides
			}
			time.Sleep(50 * time.Millisecond)
		}
		return fmt.Errorf("%s: %w", what, err)
	}

	branches := make([]messages.BranchID, nBranches)
	for i := range branches {
		if err := retry("create session", func(c *client.Client) error {
			_, b, err := c.CreateSession(ctx, fmt.Sprintf("cluster %d", i))
			branches[i] = b.ID
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}

	// The chaos: five times, SIGKILL a member and start it again.
	const kills = 5
	var (
		killed    atomic.Int64
		rejects   atomic.Int64 // ctxinf_store_head_rejects_total of the processes killed
		forwarded atomic.Int64
	)
	chaosDone := make(chan struct{})
	var chaosErr error
	go func() {
		defer close(chaosDone)
		for range kills {
			time.Sleep(time.Duration(700+rng.IntN(800)) * time.Millisecond)
			m := ms[rng.IntN(len(ms))]
			rejects.Add(int64(metric(t, m.url(), "ctxinf_store_head_rejects_total")))
			forwarded.Add(int64(metric(t, m.url(), "ctxinf_cluster_forwarded_total")))
			_ = m.s.cmd.Process.Kill()
			<-m.s.done
			killed.Add(1)
			time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
			if chaosErr = m.start(t); chaosErr != nil {
				return
			}
		}
	}()

	// The drive: workers send turns to their branches through random
	// members, each under an idempotency key, retried (same key) until
	// the turn ends; a turn that ended failed (a kill cut it) is not
	// acknowledged, and the next text goes under a new key.
	var (
		mu    sync.Mutex
		acked = map[messages.BranchID][]ack{}
		sent  atomic.Int64
		fails atomic.Int64
	)
	const workers = 12
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-chaosDone:
					if n > 0 {
						return
					}
				default:
				}
				for i := w; i < nBranches; i += workers {
					b := branches[i]
					text := fmt.Sprintf("branch %d turn %d: remember item-%d-%d", i, n, i, n)
					kctx := client.WithIdempotencyKey(ctx, client.NewIdempotencyKey())
					var res client.TurnResult
					err := retry("send", func(c *client.Client) error {
						var err error
						res, err = c.Send(kctx, b, text)
						return err
					})
					sent.Add(1)
					if err != nil {
						fails.Add(1)
						continue
					}
					mu.Lock()
					acked[b] = append(acked[b], ack{turn: res.Turn, text: text})
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	<-chaosDone
	if chaosErr != nil {
		t.Fatalf("restart a killed member: %v", chaosErr)
	}
	if killed.Load() != kills {
		t.Fatalf("%d kills, want %d", killed.Load(), kills)
	}

	// Every branch answers through every member, and holds each
	// acknowledged turn once and nothing twice.
	total := 0
	for i, b := range branches {
		for j, c := range clients {
			if err := retry("branch", func(*client.Client) error { _, err := c.Branch(ctx, b); return err }); err != nil {
				t.Errorf("branch %d through member %d: %v", i, j, err)
			}
		}
		var hist []client.HistoryEntry
		if err := retry("history", func(c *client.Client) error {
			var err error
			hist, err = fullHistory(ctx, c, b)
			return err
		}); err != nil {
			t.Fatalf("history of branch %d: %v", i, err)
		}
		var texts []string
		for _, a := range acked[b] {
			texts = append(texts, a.text)
		}
		total += checkOnce(t, fmt.Sprintf("branch %d", i), hist, texts)
	}
	// A proxied conversation goes on through whichever member gets its
	// next request.
	for i, text := range []string{"Remember: the cluster's codeword is heron.", "What is the codeword?", "Say it once more."} {
		var reply string
		if err := retry("proxy", func(*client.Client) error {
			var err error
			reply, err = proxyChat(ms[i%len(ms)].url(), "cluster-conversation", text)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if i > 0 && !strings.Contains(reply, "the cluster's codeword is") {
			t.Fatalf("proxied turn %d through member %d: %q does not hold the conversation's first turn", i, i%len(ms), reply)
		}
	}

	for _, m := range ms {
		rejects.Add(int64(metric(t, m.url(), "ctxinf_store_head_rejects_total")))
		forwarded.Add(int64(metric(t, m.url(), "ctxinf_cluster_forwarded_total")))
	}
	if total == 0 {
		t.Fatal("no turn was acknowledged")
	}
	t.Logf("%d kills; %d turns sent, %d acknowledged, %d not (cut by a kill); %d requests forwarded; "+
		"%d writes refused because their head had moved (stale activations)",
		kills, sent.Load(), total, fails.Load(), forwarded.Load(), rejects.Load())
}

// proxyChat sends one user message of conversation to the
// OpenAI-compatible chat completions route at url and returns the reply.
func proxyChat(url, conversation, text string) (string, error) {
	body, _ := json.Marshal(map[string]any{"model": "local", "messages": []map[string]string{{"role": "user", "content": text}}})
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Ctx-Conversation", conversation)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%d %s", resp.StatusCode, data)
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(data, &out); err != nil || len(out.Choices) != 1 {
		return "", fmt.Errorf("answer %s: %v", data, err)
	}
	return out.Choices[0].Message.Content, nil
}

// fullHistory reads all of branch's history through c, oldest first.
func fullHistory(ctx context.Context, c *client.Client, branch messages.BranchID) ([]client.HistoryEntry, error) {
	var hist []client.HistoryEntry
	for before := (messages.NodeID{}); ; {
		page, next, err := c.History(ctx, branch, before, 200)
		if err != nil {
			return nil, err
		}
		hist = append(page, hist...)
		if next.IsZero() {
			return hist, nil
		}
		before = next
	}
}

// checkOnce reports a user message that is in hist more than once, and
// an acknowledged text that is not in it exactly once; it returns how
// many texts were acknowledged. who names the branch in the errors.
func checkOnce(t *testing.T, who string, hist []client.HistoryEntry, acked []string) int {
	t.Helper()
	seen := map[string]int{}
	for _, h := range hist {
		if h.Message.Role == messages.RoleUser {
			seen[h.Message.RenderedText]++
		}
	}
	for text, n := range seen {
		if n > 1 {
			t.Errorf("%s: %q is in its history %d times", who, text, n)
		}
	}
	for _, text := range acked {
		if seen[text] != 1 {
			t.Errorf("%s: acknowledged turn %q is in its history %d times, want once", who, text, seen[text])
		}
	}
	return len(acked)
}
