package tests

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/pgtest"
	"github.com/contextinfinity/ctxinf/messages"
)

// `ctxinf serve` on PostgreSQL rides out the database going away, as
// docs/CLUSTER.md says: while writers send turns (each under an
// idempotency key, retried under it until the turn ends), every
// connection of the server's to the database is cut three times (what a
// failover or a database restart does to its clients), then the
// database refuses connections for two seconds. Requests meanwhile fail
// with a 5xx answer, in bounded time; the same process, never
// restarted, takes turns again afterwards; and every acknowledged turn
// is in its branch's history once, nothing twice.
func TestServeRidesOutDatabaseOutage(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.Start(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	dbName := strings.TrimPrefix(u.Path, "/")
	admin := *u
	admin.Path = "/postgres" // not the server's database: the cuts spare it
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	cut := func() int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1`,
			dbName).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	allow := func(yes bool) {
		t.Helper()
		if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s WITH ALLOW_CONNECTIONS %t", pgx.Identifier{dbName}.Sanitize(), yes)); err != nil {
			t.Fatal(err)
		}
	}
	defer allow(true) // pgtest drops the database at the end, FORCE or not

	s := startServe(t, t.TempDir(), "CTX_STORE_BACKEND=postgres", "CTX_STORE_POSTGRES_URL="+dbURL, "CTX_LOCAL_DELAY=1ms")
	c := client.New(s.url)
	var branches []messages.BranchID
	for i := range 3 {
		_, b, err := c.CreateSession(ctx, fmt.Sprintf("writer %d", i))
		if err != nil {
			t.Fatal(err)
		}
		branches = append(branches, b.ID)
	}

	// The writers: each sends turns to its branch, each under a new
	// idempotency key, retried under it until the turn ends (acknowledged,
	// or failed: then the next text goes under a new key). An attempt
	// that gets no HTTP answer within requestBound, or no answer at all,
	// is a failure of the test.
	const requestBound = 30 * time.Second
	var (
		mu       sync.Mutex
		acked    = make([][]string, len(branches))
		statuses = map[int]int{} // status of the failed attempts: count
		bad      []string        // attempts without a 503 or 504 answer
		samples  = map[string]string{}
		failed   atomic.Int64 // turns that ended failed
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w, br := range branches {
		wg.Go(func() {
			for i := 0; ; i++ {
				text := fmt.Sprintf("writer %d turn %d", w, i)
				kctx := client.WithIdempotencyKey(ctx, client.NewIdempotencyKey())
				for {
					select {
					case <-stop:
						return // a turn retried no more is not acknowledged
					default:
					}
					rctx, cancel := context.WithTimeout(kctx, requestBound)
					res, err := c.Send(rctx, br, text)
					cancel()
					var ce *client.Error
					var te *client.TurnError
					switch {
					case err == nil && res.Phase == messages.PhaseResponseFinalized:
						mu.Lock()
						acked[w] = append(acked[w], text)
						mu.Unlock()
					case err == nil:
						mu.Lock()
						bad = append(bad, fmt.Sprintf("writer %d: %q answered %s", w, text, res.Phase))
						mu.Unlock()
					case errors.As(err, &ce):
						mu.Lock()
						statuses[ce.Status]++
						k := fmt.Sprintf("%d %s", ce.Status, ce.Code)
						if _, ok := samples[k]; !ok {
							samples[k] = ce.Message
						}
						// 503 (unavailable, or a turn interrupted) or a
						// time-out that says whether it was accepted.
						if ce.Status != 503 && ce.Status != 504 && ce.Code != "turn_in_flight" {
							bad = append(bad, fmt.Sprintf("writer %d: %q: %v", w, text, err))
						}
						mu.Unlock()
						if errors.As(err, &te) {
							failed.Add(1)
							break // the turn ended failed: the next text
						}
						time.Sleep(20 * time.Millisecond)
						continue
					default: // a hang past the bound, or the process gone
						mu.Lock()
						bad = append(bad, fmt.Sprintf("writer %d: %q: %v", w, text, err))
						mu.Unlock()
						time.Sleep(20 * time.Millisecond)
						continue
					}
					break
				}
			}
		})
	}
	defer func() { // on a t.Fatal too
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	alive := func() {
		t.Helper()
		select {
		case err := <-s.done:
			t.Fatalf("ctxinf serve exited: %v", err)
		default:
		}
	}
	// progress waits until each writer has a turn acknowledged after now.
	progress := func(when string) {
		t.Helper()
		mu.Lock()
		base := make([]int, len(acked))
		for i := range acked {
			base[i] = len(acked[i])
		}
		mu.Unlock()
		deadline := time.Now().Add(60 * time.Second)
		for {
			alive()
			mu.Lock()
			done := true
			for i := range acked {
				done = done && len(acked[i]) >= base[i]+2
			}
			mu.Unlock()
			if done {
				return
			}
			if time.Now().After(deadline) {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("%s: a writer has no turn acknowledged after a minute (statuses of failed attempts %v; %d without an HTTP answer, e.g. %q)",
					when, statuses, len(bad), bad[:min(len(bad), 3)])
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	progress("at the start")
	cuts := 0
	for i := range 3 {
		cuts += cut()
		progress(fmt.Sprintf("after cut %d", i+1))
	}
	// The long outage: no connection for two seconds.
	allow(false)
	cuts += cut()
	mu.Lock()
	before := statuses[503]
	mu.Unlock()
	time.Sleep(2 * time.Second)
	alive()
	mu.Lock()
	during := statuses[503] - before
	mu.Unlock()
	allow(true)
	if during == 0 {
		t.Errorf("no request failed with a 503 while the database refused connections")
	}
	progress("after the database came back")
	alive()
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("%d attempts got no 503 or 504 answer, e.g. %q", len(bad), bad[:min(len(bad), 5)])
	}
	total := 0
	for w, br := range branches {
		hist, err := fullHistory(ctx, c, br)
		if err != nil {
			t.Fatalf("history of writer %d: %v", w, err)
		}
		total += checkOnce(t, fmt.Sprintf("writer %d", w), hist, acked[w])
	}
	alive()
	t.Logf("samples %q", samples)
	t.Logf("%d connections cut; %d turns acknowledged, %d ended failed; failed attempts by status %v", cuts, total, failed.Load(), statuses)
	s.stop(t)
}
