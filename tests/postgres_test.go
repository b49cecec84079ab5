package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/pgtest"
	"github.com/contextinfinity/ctxinf/messages"
)

// `ctxinf serve` with store.backend postgres keeps everything in the
// database: turns sent by three writers survive a SIGKILL and a clean
// stop, each acknowledged one exactly once; history, fork and search
// work after both; and a server on another data directory pointed at
// the same database sees it all. The data directory holds no Badger
// store.
func TestServeOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.Start(t)
	pg := []string{"CTX_STORE_BACKEND=postgres", "CTX_STORE_POSTGRES_URL=" + url}
	dir := t.TempDir()
	ctx := context.Background()
	s := startServe(t, dir, pg...)
	c := client.New(s.url)
	_, b, err := c.CreateSession(ctx, "on postgres")
	if err != nil {
		t.Fatal(err)
	}

	// Three writers on three sessions (a branch takes one turn at a
	// time), each sending until the kill.
	branches := []messages.BranchID{b.ID}
	for i := 1; i < 3; i++ {
		_, f, err := c.CreateSession(ctx, fmt.Sprintf("writer %d", i))
		if err != nil {
			t.Fatal(err)
		}
		branches = append(branches, f.ID)
	}
	var mu sync.Mutex
	acked := map[messages.BranchID][]string{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w, br := range branches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				text := fmt.Sprintf("writer %d turn %d mentions zanzibar%d", w, i, w)
				res, err := c.Send(ctx, br, text)
				if err != nil {
					return // the kill
				}
				if res.Phase == messages.PhaseResponseFinalized {
					mu.Lock()
					acked[br] = append(acked[br], text)
					mu.Unlock()
				}
			}
		}()
	}
	// Kill once each writer has at least three acknowledged turns.
	for {
		mu.Lock()
		n := min(len(acked[branches[0]]), len(acked[branches[1]]), len(acked[branches[2]]))
		mu.Unlock()
		if n >= 3 {
			break
		}
		select {
		case err := <-s.done:
			t.Fatalf("serve exited: %v", err)
		default:
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	_ = s.cmd.Process.Kill()
	<-s.done
	wg.Wait()
	if _, err := os.Stat(filepath.Join(dir, "store")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the data directory has a Badger store: %v", err)
	}

	check := func(c *client.Client, when string) {
		t.Helper()
		for _, br := range branches {
			hist, _, err := c.History(ctx, br, messages.TurnID{}, 500)
			if err != nil {
				t.Fatalf("%s: history: %v", when, err)
			}
			seen := map[string]int{}
			for _, h := range hist {
				if h.Message.Role == messages.RoleUser {
					seen[h.Message.RenderedText]++
				}
			}
			mu.Lock()
			for _, text := range acked[br] {
				if seen[text] != 1 {
					t.Errorf("%s: branch %s has acknowledged turn %q %d times, want once", when, br, text, seen[text])
				}
			}
			mu.Unlock()
			for text, n := range seen {
				if n > 1 {
					t.Errorf("%s: branch %s has turn %q %d times", when, br, text, n)
				}
			}
		}
	}

	s = startServe(t, dir, pg...)
	c = client.New(s.url)
	check(c, "after SIGKILL")
	// It takes turns, forks from an acknowledged turn, and finds a turn by
	// its words.
	res, err := c.Send(ctx, b.ID, "after the kill, remember kilimanjaro")
	if err != nil || res.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("turn after restart: %+v, %v", res, err)
	}
	mu.Lock()
	acked[b.ID] = append(acked[b.ID], "after the kill, remember kilimanjaro")
	mu.Unlock()
	fork, err := c.Fork(ctx, b.ID, res.Turn, "after the kill")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Send(ctx, fork.ID, "on the fork"); err != nil || res.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("turn on the fork: %+v, %v", res, err)
	}
	fh, _, err := c.History(ctx, fork.ID, messages.NodeID{}, 500)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(fh); n < 4 || fh[n-2].Message.RenderedText != "on the fork" ||
		fh[n-4].Message.RenderedText != "after the kill, remember kilimanjaro" {
		t.Fatalf("fork's history: %d entries, ending %+v", n, fh[max(0, n-4):])
	}
	s.stop(t)

	// A clean stop, then a server on another data directory on the same
	// database.
	s = startServe(t, t.TempDir(), pg...)
	c = client.New(s.url)
	check(c, "after a clean stop, from another data directory")
	if err := c.Commit(ctx, b.ID); err != nil { // index the pending turns too
		t.Fatal(err)
	}
	var hits []client.Hit
	var raw []byte
	for range 500 { // indexing is asynchronous; Commit does not wait for it
		if hits, err = c.Search(ctx, b.ID, "kilimanjaro", 5, true); err != nil {
			t.Fatal(err)
		}
		// The hash embedder finds the other turns' chunks similar too:
		// wait for the one that holds the word.
		if raw, _ = json.Marshal(hits); strings.Contains(string(raw), "kilimanjaro") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(string(raw), "kilimanjaro") {
		t.Fatalf("search for kilimanjaro: %s", raw)
	}
	s.stop(t)
}
