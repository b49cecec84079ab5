package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/internal/faults"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/supervision"
)

// chaosResult is what `ctxinf chaos --json` prints: exactly these keys.
type chaosResult struct {
	Seed             uint64 `json:"seed"`
	TurnsAcked       int    `json:"turns_acked"`
	TurnsCommitted   int    `json:"turns_committed"`
	Lost             int    `json:"lost"`
	DuplicateCommits int    `json:"duplicate_commits"`
	HeadErrors       int    `json:"head_errors"`
	// StuckBranches counts branches that made no progress for --stall
	// (no turn acknowledged; after the drivers, a fold the policy calls
	// for not made with nobody asking, pending turns not committed when
	// asked, or committed turns not indexed): the verdict is "fail".
	StuckBranches int   `json:"stuck_branches"`
	Restarts      int64 `json:"restarts"`
	// Kills counts the actors killed, by kind; Failures the failures
	// supervision handled, by kind (a kill, or any other failure).
	Kills    map[supervision.Kind]int64 `json:"kills"`
	Failures map[supervision.Kind]int64 `json:"failures"`
	Seconds  float64                    `json:"seconds"`
	Verdict  string                     `json:"verdict"` // "pass" or "fail"
}

// Run drives turns on many branches in one process while killing
// actors of the chosen kinds (branch actors panicked or stopped, step,
// journal, librarian and indexer actors panicked mid-work), then verifies
// that every acknowledged turn is there, none was committed twice, and
// every head is valid. It always ends with a verdict: a branch that makes
// no progress for --stall is counted stuck, and fails it. Once the drivers
// are done, each branch must make the folds its policy calls for by
// itself (no request asks), then commit its pending turns when asked,
// then index every committed turn by itself.
func Run(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	branches := fs.Int("branches", 50, "branches driven at once")
	turns := fs.Int("turns", 20, "turns per branch")
	every := fs.Duration("kill-every", 20*time.Millisecond, "how often an actor is killed")
	kindList := fs.String("kill-kinds", "all", "actor kinds killed, comma-separated: branch, step, journal, librarian, indexer, or all")
	stall := fs.Duration("stall", time.Minute, "a branch with no progress for this long is stuck: its driver gives up and the verdict is fail")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "random seed (printed; pass it to replay)")
	dir := fs.String("dir", "", "data directory (default: a temporary one, removed afterwards)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *branches < 1 || *turns < 1 || *every <= 0 || *stall <= 0 {
		return errors.New("chaos: --branches and --turns must be at least 1, --kill-every and --stall positive")
	}
	kinds, err := supervision.ParseKinds(*kindList)
	if err != nil {
		return fmt.Errorf("chaos: --kill-kinds: %w", err)
	}
	path, done, err := cli.WorkDir(*dir, "ctxinf-chaos-")
	if err != nil {
		return err
	}
	defer done()
	*dir = path
	e.Log.Info().Uint64("seed", *seed).Msg("chaos")
	e.Config.DataDir = *dir
	e.Config.Local.Delay = 0
	e.Config.DefaultModel = ""                                     // the local provider, whatever keys are set
	e.Log = e.Log.Level(max(e.Log.GetLevel(), zerolog.ErrorLevel)) // restarts are the point: don't log each
	ctx := context.Background()
	cfg, err := e.RuntimeConfig()
	if err != nil {
		return err
	}
	policy := *cfg.Fold
	faults := &faults.Injector{}
	cfg.Faults = faults
	rt, err := e.OpenRuntimeWith(ctx, cfg)
	if err != nil {
		return err
	}
	defer rt.Close()

	ids := make([]messages.BranchID, *branches)
	for i := range ids {
		_, b, err := rt.CreateSession(ctx, fmt.Sprintf("chaos-%d", i))
		if err != nil {
			return err
		}
		ids[i] = b.ID
	}
	started := time.Now()
	acked := make([][]messages.TurnID, *branches)
	stuck := make([]bool, *branches)
	var attempts, branchKills atomic.Int64
	stop := make(chan struct{})
	var killer sync.WaitGroup
	killer.Go(func() {
		rng := rand.New(rand.NewPCG(*seed, 1))
		t := time.NewTicker(*every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				kind := kinds[rng.IntN(len(kinds))]
				if kind != supervision.KindBranch {
					// Killed at its next kill point, mid-work; one kill
					// at most waits per kind, so that work goes on.
					if faults.Kills.Armed(kind) == 0 {
						faults.Kills.Arm(kind)
					}
					continue
				}
				b := ids[rng.IntN(len(ids))]
				branchKills.Add(1)
				if rng.IntN(2) == 0 {
					faults.KillBranch(ctx, b)
				} else {
					rt.Stop(ctx, b)
				}
			}
		}
	})
	var drivers sync.WaitGroup
	for i, b := range ids {
		drivers.Go(func() {
			progress := time.Now()
			for n := 0; n < *turns; {
				if time.Since(progress) > *stall {
					stuck[i] = true
					return
				}
				attempts.Add(1)
				s, err := rt.Submit(ctx, b, fmt.Sprintf("branch %d turn %d", i, n))
				if err != nil {
					time.Sleep(time.Millisecond) // busy, restarting or passivated: try again
					continue
				}
				timeout := make(chan struct{})
				tm := time.AfterFunc(10*time.Second, func() { close(timeout) })
				_, last := s.Wait(timeout)
				tm.Stop()
				if last.Done && last.Phase == messages.PhaseResponseFinalized {
					acked[i] = append(acked[i], s.Turn)
					progress = time.Now()
					n++
				}
			}
		})
	}
	drivers.Wait()
	close(stop)
	killer.Wait()

	res := chaosResult{Seed: *seed}
	for i, b := range ids {
		res.TurnsAcked += len(acked[i])
		if err := waitSettled(ctx, rt, b, policy, *stall); err != nil {
			e.Log.Error().Err(err).Str("branch", b.String()).Msg("chaos: stuck")
			stuck[i] = true
		}
		lost, dups, headErr, committed, err := verifyBranch(ctx, rt, b, acked[i])
		if err != nil {
			return err
		}
		res.Lost += lost
		res.DuplicateCommits += dups
		res.HeadErrors += headErr
		res.TurnsCommitted += committed
		if stuck[i] {
			res.StuckBranches++
		}
	}
	res.Restarts = rt.Restarts()
	res.Failures = rt.Failures()
	res.Kills = map[supervision.Kind]int64{}
	for _, k := range supervision.Kinds {
		res.Kills[k] = faults.Kills.Killed(k)
	}
	res.Kills[supervision.KindBranch] = branchKills.Load()
	res.Seconds = time.Since(started).Seconds()
	res.Verdict = "pass"
	if res.Lost != 0 || res.DuplicateCommits != 0 || res.HeadErrors != 0 || res.StuckBranches != 0 {
		res.Verdict = "fail"
	}
	if *asJSON {
		if err := json.NewEncoder(e.Stdout).Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.Stdout, "seed %d: %d branches × %d turns (%d attempts), kill every %v, kinds %v, %.1f s\n",
			*seed, *branches, *turns, attempts.Load(), *every, kinds, res.Seconds)
		fmt.Fprintf(e.Stdout, "turns acked %d · committed %d · lost %d · duplicate commits %d · head errors %d · stuck branches %d · restarts %d\n",
			res.TurnsAcked, res.TurnsCommitted, res.Lost, res.DuplicateCommits, res.HeadErrors, res.StuckBranches, res.Restarts)
		for _, k := range supervision.Kinds {
			fmt.Fprintf(e.Stdout, "  %-9s killed %6d · failures handled %6d\n", k, res.Kills[k], res.Failures[k])
		}
		fmt.Fprintf(e.Stdout, "verdict: %s\n", res.Verdict)
	}
	if res.Verdict != "pass" {
		return fmt.Errorf("chaos (seed %d): lost %d, duplicate commits %d, head errors %d, stuck branches %d",
			*seed, res.Lost, res.DuplicateCommits, res.HeadErrors, res.StuckBranches)
	}
	return nil
}

// waitSettled waits for a branch to settle once nothing drives it, for
// stall at most at each step: with nobody asking, it makes the folds
// policy calls for and ends the turn in flight, if any (a branch with
// work due and nothing in flight makes progress); asked to commit
// (waitCommitted), it folds every pending turn; and with nobody asking it
// indexes every committed turn.
func waitSettled(ctx context.Context, rt *ctxinf.Runtime, b messages.BranchID, policy core.Policy, stall time.Duration) error {
	var last string
	settled := func(done func(actors.BranchInfo) bool) bool {
		deadline := time.Now().Add(stall)
		for time.Now().Before(deadline) {
			info, err := rt.Inspect(ctx, b)
			if err == nil && done(info) {
				return true
			}
			if err != nil {
				last = err.Error()
			} else {
				last = fmt.Sprintf("%d pending, %d committed, %d indexed, in flight %v", info.Pending, info.Committed, info.Indexed, info.InFlight)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return false
	}
	if !settled(func(info actors.BranchInfo) bool {
		_, due := (&core.Branch{Turns: info.Turns, Policy: policy}).FoldDue(core.FoldAuto)
		return !due && info.InFlight == nil
	}) {
		return fmt.Errorf("branch %s: a fold its policy calls for was not made in %v with nobody asking (last: %s)", b, stall, last)
	}
	if err := waitCommitted(ctx, rt, b, stall); err != nil {
		return err
	}
	if !settled(func(info actors.BranchInfo) bool { return info.Indexed >= info.Committed }) {
		return fmt.Errorf("branch %s: committed turns were not indexed in %v (last: %s)", b, stall, last)
	}
	return nil
}

// waitCommitted folds a branch's pending turns and waits until none is
// left, for stall at most.
func waitCommitted(ctx context.Context, rt *ctxinf.Runtime, b messages.BranchID, stall time.Duration) error {
	deadline := time.Now().Add(stall)
	var last string
	var asked time.Time
	for time.Now().Before(deadline) {
		info, err := rt.Inspect(ctx, b)
		if err == nil && info.Pending == 0 && info.InFlight == nil {
			return nil
		}
		if err == nil {
			last = fmt.Sprintf("%d pending, in flight %v", info.Pending, info.InFlight)
			if time.Since(asked) > time.Second {
				asked = time.Now()
				if err = rt.CommitPending(ctx, b); err != nil {
					last += ", commit: " + err.Error()
				}
			}
		} else {
			last = err.Error()
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("branch %s: pending turns were not committed in %v (last: %s)", b, stall, last)
}

// verifyBranch checks a branch against what was acknowledged: every acked
// turn has its row, user message and reply; no turn is folded into two
// states; the transcript head is the branch's tip and walks back to the
// root with consecutive depths.
func verifyBranch(ctx context.Context, rt *ctxinf.Runtime, b messages.BranchID, acked []messages.TurnID) (lost, dups, headErr, committed int, err error) {
	db := rt.DB()
	rows := map[messages.TurnID]persistence.TurnRow{}
	if err := db.EachTurnRow(ctx, b, func(r persistence.TurnRow) error { rows[r.ID] = r; return nil }); err != nil {
		return 0, 0, 0, 0, err
	}
	for _, id := range acked {
		r, ok := rows[id]
		if !ok || r.Phase < messages.PhaseResponseFinalized || r.Phase == messages.PhaseFailed || r.Reply.IsZero() {
			lost++
			continue
		}
		if _, err := db.Node(ctx, r.Reply); err != nil {
			lost++
		}
	}
	folded := map[messages.TurnID]int{}
	states, err := db.StateRows(ctx, b, 0, persistence.MaxPageNodes)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	for _, s := range states {
		for _, id := range s.Turns {
			folded[id]++
		}
	}
	for _, n := range folded {
		committed++
		if n > 1 {
			dups += n - 1
		}
	}
	info, err := rt.Inspect(ctx, b)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	h, err := db.Head(ctx, b)
	if err != nil || h.Node != info.Tip {
		return lost, dups, 1, committed, nil
	}
	chain, err := db.Chain(ctx, h.Node)
	if err != nil || uint64(len(chain)) != h.Depth+1 {
		return lost, dups, 1, committed, nil
	}
	for i, t := range chain {
		if t.Depth != uint64(i) {
			return lost, dups, 1, committed, nil
		}
	}
	return lost, dups, 0, committed, nil
}
