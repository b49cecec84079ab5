package tests

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"strconv"
	"testing"
	"time"
)

var chaosSeed = flag.Uint64("chaosseed", 0, "seed of TestProcessKills (0: from the clock)")

// TestProcessKills SIGKILLs the whole binary at seeded moments while it
// is answering a stream of messages, restarts it each time, and checks
// that every turn the chat reported as finalized is still there, folded
// into at most one state, after recovery.
func TestProcessKills(t *testing.T) {
	t.Parallel()
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -chaosseed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	kills := 8
	if testing.Short() {
		kills = 3
	}
	dir := t.TempDir()
	finalized := regexp.MustCompile(`\[turn (\d+) · response_finalized`)
	acked := map[int]bool{}
	for i := range kills {
		p := start(t, dir, append(foldEveryTurn, "CTX_LOCAL_DELAY=1ms", "CTX_STREAM_FLUSH_INTERVAL=5ms")...)
		go func() {
			for j := 0; ; j++ {
				if _, err := io.WriteString(p.stdin, fmt.Sprintf("kill %d message %d: remember item-%d-%d\n", i, j, i, j)); err != nil {
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		p.waitFor("[turn", 0) // at least one turn under way
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		p.kill()
		for _, m := range finalized.FindAllStringSubmatch(p.output(), -1) {
			n, _ := strconv.Atoi(m[1])
			acked[n] = true
		}
	}
	if len(acked) == 0 {
		t.Fatal("no turn was acknowledged before any kill")
	}
	// Recover and let every pending turn commit.
	q := start(t, dir, foldEveryTurn...)
	if !q.until("/pending", "no pending turns", 5000) {
		t.Fatalf("pending turns never committed:\n%s", q.output())
	}
	q.quit()

	cmd := inspectCmd(dir, "--turns", "1000000")
	r := runInspect(t, cmd)
	b := r.Sessions[0].Branches[0]
	phase := map[int]string{}
	for _, tr := range b.LastTurns {
		phase[tr.Seq] = tr.Phase
	}
	for seq := range acked {
		switch phase[seq] {
		case "response_finalized", "state_committed", "done":
		default:
			t.Errorf("acknowledged turn %d is %q after recovery", seq, phase[seq])
		}
	}
	folded := map[string]int{}
	for _, s := range b.States {
		for _, id := range s.Turns {
			folded[id]++
			if folded[id] > 1 {
				t.Errorf("turn %s committed twice", id)
			}
		}
	}
	if len(r.Jobs) > 0 && b.Pending == 0 {
		// index jobs may remain from the last quit; respond jobs may not
		for _, j := range r.Jobs {
			if j.Type == "respond_turn" {
				t.Errorf("a respond job survived recovery: %+v", j)
			}
		}
	}
	t.Logf("%d kills, %d turns acknowledged, %d turns in all, %d states", kills, len(acked), b.Turns, len(b.States))
}
