package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"sort"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/netcut"
	"github.com/contextinfinity/ctxinf/messages"
)

// chaosPlan is what `bench cluster --kills/--outages/--pauses` does to a cluster
// while the load runs, and how long it gives the cluster to heal.
type chaosPlan struct {
	kills, outages int
	pauses         int
	outageFor      time.Duration // each outage's length
	pauseFor       time.Duration // each pause's length
	every          time.Duration // the mean gap between two events
	healWithin     time.Duration
	runs           int
	seed           uint64
	ran            int // runs carried out: run k's seed is seed+k
}

func (c *chaosPlan) flags(fs *flag.FlagSet) {
	fs.IntVar(&c.kills, "kills", 0, "SIGKILL a member this many times during the load (each restarted on its ports); with --outages, the cluster run only")
	fs.IntVar(&c.outages, "outages", 0, "cut the members' connections to PostgreSQL this many times during the load (a proxy between them refuses connections)")
	fs.DurationVar(&c.outageFor, "outage-for", 3*time.Second, "how long each outage lasts")
	fs.IntVar(&c.pauses, "pauses", 0, "stop a member (SIGSTOP) this many times during the load, and let it go on (SIGCONT) after --pause-for: a machine that stalls")
	fs.DurationVar(&c.pauseFor, "pause-for", 5*time.Second, "how long each pause lasts")
	fs.DurationVar(&c.every, "chaos-every", 2*time.Second, "the mean gap between two kills or outages")
	fs.DurationVar(&c.healWithin, "heal-within", time.Minute, "after the last kill and outage, how long every branch has to answer through every member")
	fs.IntVar(&c.runs, "runs", 1, "with --kills, --outages or --pauses: how many cluster runs, each on a fresh database")
	fs.Uint64Var(&c.seed, "seed", 0, "the chaos's random seed (0: from the clock; printed)")
}

func (c *chaosPlan) check() error {
	switch {
	case c.kills < 0:
		return fmt.Errorf("--kills is %d, want 0 or more", c.kills)
	case c.outages < 0:
		return fmt.Errorf("--outages is %d, want 0 or more", c.outages)
	case c.pauses < 0:
		return fmt.Errorf("--pauses is %d, want 0 or more", c.pauses)
	case c.outageFor <= 0:
		return fmt.Errorf("--outage-for is %v, want more than 0", c.outageFor)
	case c.pauseFor <= 0:
		return fmt.Errorf("--pause-for is %v, want more than 0", c.pauseFor)
	case c.every <= 0:
		return fmt.Errorf("--chaos-every is %v, want more than 0", c.every)
	case c.healWithin <= 0:
		return fmt.Errorf("--heal-within is %v, want more than 0", c.healWithin)
	case c.runs < 1:
		return fmt.Errorf("--runs is %d, want at least 1", c.runs)
	case c.runs > 1 && !c.on():
		return errors.New("--runs repeats a run with --kills, --outages or --pauses: give one of them")
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	return nil
}

func (c *chaosPlan) on() bool { return c.kills > 0 || c.outages > 0 || c.pauses > 0 }

// chaosFigures is what one run's chaos did and how the cluster healed.
type chaosFigures struct {
	Seed    uint64 `json:"seed"`
	Kills   int    `json:"kills"`
	Outages int    `json:"outages"`
	Pauses  int    `json:"pauses"`
	// FailedStarts counts the restarts of a killed member that exited
	// before they served (the database was cut) and were tried again.
	FailedStarts int `json:"failed_starts"`
	// Pairs is branches x members: every branch is read through every
	// member once the chaos is over.
	Pairs int `json:"pairs"`
	// UnreachableAtEnd is the pairs that did not answer on the first
	// read after the chaos; UnreachableBranches the distinct branches
	// among them.
	UnreachableAtEnd    int `json:"unreachable_at_end"`
	UnreachableBranches int `json:"unreachable_branches"`
	// HealS is the seconds from the end of the chaos until every pair
	// had answered (-1 if some never did within --heal-within); Unhealed
	// the pairs that never did, and HealError the last error of one.
	HealS     float64 `json:"heal_s"`
	Unhealed  int     `json:"unhealed"`
	HealError string  `json:"heal_error,omitempty"`
	// UnhealedThrough counts the unhealed pairs by the member read
	// through.
	UnhealedThrough []int `json:"unhealed_through,omitempty"`
	// MembersSeen is each member's ctxinf_cluster_members at the end;
	// Split the members that did not see them all (a topology that
	// leaves a live member out places sessions on two members at once).
	MembersSeen []int `json:"members_seen"`
	Split       int   `json:"split"`

	end time.Time // when the chaos ended
}

// proxyDatabase puts a netcut proxy in front of the PostgreSQL server of
// dbURL and returns it with the URL through it.
func proxyDatabase(dbURL string) (*netcut.Proxy, string, error) {
	u, err := url.Parse(dbURL)
	if err != nil || u.Hostname() == "" {
		return nil, "", errors.New("--outages needs a PostgreSQL URL with a host (postgres://user:password@host:port/db)")
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	p, err := netcut.Listen(target)
	if err != nil {
		return nil, "", fmt.Errorf("a proxy in front of PostgreSQL: %w", err)
	}
	u.Host = p.Addr()
	return p, u.String(), nil
}

// run carries out the plan on the members procs (replacing a killed one
// by its restart) and db, and returns when every event is over: each
// killed member serves again, each paused one goes on, and the database
// is back.
func (c *chaosPlan) run(procs []*benchProc, db *netcut.Proxy) chaosFigures {
	seed := c.seed + uint64(c.ran)
	c.ran++
	rng := rand.New(rand.NewPCG(seed, uint64(len(procs))))
	f := chaosFigures{Seed: seed}
	const (
		kill = iota
		outage
		pause
	)
	events := make([]int, 0, c.kills+c.outages+c.pauses)
	for range c.kills {
		events = append(events, kill)
	}
	for range c.outages {
		events = append(events, outage)
	}
	for range c.pauses {
		events = append(events, pause)
	}
	rng.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		busy = map[int]bool{} // members being restarted or paused
	)
	for _, ev := range events {
		time.Sleep(time.Duration(float64(c.every) * (0.5 + rng.Float64())))
		if ev == outage {
			f.Outages++
			wg.Go(func() {
				db.Cut()
				time.Sleep(c.outageFor)
				db.Restore()
			})
			continue
		}
		// A member neither restarting nor paused (waiting for one).
		mu.Lock()
		var up []int
		for {
			up = up[:0]
			for i := range procs {
				if !busy[i] {
					up = append(up, i)
				}
			}
			if len(up) > 0 {
				break
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
		}
		i := up[rng.IntN(len(up))]
		busy[i] = true
		p := procs[i]
		mu.Unlock()
		if ev == pause {
			if pauseProcess(p.cmd.Process) != nil {
				mu.Lock()
				busy[i] = false
				mu.Unlock()
				continue
			}
			f.Pauses++
			wg.Go(func() {
				time.Sleep(c.pauseFor)
				_ = resumeProcess(p.cmd.Process)
				mu.Lock()
				busy[i] = false
				mu.Unlock()
			})
			continue
		}
		_ = p.cmd.Process.Kill()
		<-p.done
		f.Kills++
		pause := time.Duration(100+rng.IntN(500)) * time.Millisecond
		wg.Go(func() {
			time.Sleep(pause)
			np, failed := restart(p)
			mu.Lock()
			procs[i] = np
			busy[i] = false
			f.FailedStarts += failed
			mu.Unlock()
		})
	}
	wg.Wait()
	f.end = time.Now()
	return f
}

// restart starts p again on its ports until it serves (a start while the
// database is cut exits: it is tried again), for at most 5 minutes; it
// returns the new process and how many starts failed.
func restart(p *benchProc) (*benchProc, int) {
	failed := 0
	deadline := time.Now().Add(5 * time.Minute)
	for {
		np, err := startProc(p.bin, p.addr, p.args, p.env, p.dir)
		if err == nil {
			if err = waitServing(context.Background(), []*benchProc{np}, 0, time.Until(deadline)); err == nil {
				return np, failed
			}
			_ = np.cmd.Process.Kill()
			<-np.done
		}
		if time.Now().After(deadline) {
			if np == nil {
				np = p // its exit says why
			}
			return np, failed
		}
		failed++
		time.Sleep(500 * time.Millisecond)
	}
}

// heal reads every branch through every member (urls), again and again
// until each has answered once and every member sees all the members,
// or within has passed since the chaos ended, and records how long that
// took.
func (f *chaosFigures) heal(ctx context.Context, urls []string, branches []messages.BranchID, within time.Duration) {
	type pair struct{ member, branch int }
	clients := make([]*client.Client, len(urls))
	for i, u := range urls {
		clients[i] = client.New(u)
	}
	var all []pair
	for m := range urls {
		for b := range branches {
			all = append(all, pair{m, b})
		}
	}
	pending := all
	f.Pairs = len(all)
	deadline := f.end.Add(within)
	first := true
	f.MembersSeen = make([]int, len(urls))
	split := func() int {
		n := 0
		for i, u := range urls {
			f.MembersSeen[i] = int(scrapeMetric(u, "ctxinf_cluster_members"))
			if f.MembersSeen[i] != len(urls) {
				n++
			}
		}
		return n
	}
	for {
		var (
			mu     sync.Mutex
			failed []pair
			wg     sync.WaitGroup
			sem    = make(chan struct{}, 16)
		)
		for _, p := range pending {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := clients[p.member].Branch(rctx, branches[p.branch])
				cancel()
				if err != nil {
					mu.Lock()
					failed = append(failed, p)
					f.HealError = fmt.Sprintf("branch %s through member %d (%s): %v", branches[p.branch], p.member, urls[p.member], err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if first {
			f.UnreachableAtEnd = len(failed)
			seen := map[int]bool{}
			for _, p := range failed {
				seen[p.branch] = true
			}
			f.UnreachableBranches = len(seen)
			first = false
		}
		pending = failed
		wasSplit := f.Split
		if f.Split = split(); f.Split == 0 && wasSplit > 0 {
			pending = all // the topology changed: every pair again
		}
		if (len(pending) == 0 && f.Split == 0) || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	f.Unhealed = len(pending)
	if f.Split > 0 && f.Unhealed == 0 {
		f.HealS = -1
		f.HealError = fmt.Sprintf("the members see %v members, want %d each", f.MembersSeen, len(urls))
		return
	}
	if f.Unhealed > 0 {
		f.HealS = -1
		f.UnhealedThrough = make([]int, len(urls))
		for _, p := range pending {
			f.UnhealedThrough[p.member]++
		}
		return
	}
	f.HealS = time.Since(f.end).Seconds()
	f.HealError = ""
}

// printChaosFigures prints the chaos of the runs that had one.
func printChaosFigures(w io.Writer, f ClusterFigures) {
	var runs []clusterRun
	for _, r := range f.Runs {
		if r.Chaos != nil {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nchaos: every branch read through every member after the last kill and outage")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "run\tseed\tkills\toutages\tpauses\tfailed starts\tpairs\tunreachable at end\tbranches\theal s\tunhealed\tsplit\t\n")
	for i, r := range runs {
		c := r.Chaos
		heal := fmt.Sprintf("%.1f", c.HealS)
		if c.HealS < 0 {
			heal = "never"
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t\n", i+1, c.Seed, c.Kills, c.Outages, c.Pauses, c.FailedStarts, c.Pairs,
			c.UnreachableAtEnd, c.UnreachableBranches, heal, c.Unhealed, c.Split)
	}
	tw.Flush()
	for i, r := range runs {
		if r.Chaos.HealError != "" {
			fmt.Fprintf(w, "run %d: not healed (unreachable pairs by member read through: %v): %s\n", i+1, r.Chaos.UnhealedThrough, r.Chaos.HealError)
		}
	}
}

// unhealed is the error of a bench whose chaos left some branch
// unreachable through some member.
func unhealed(f ClusterFigures) error {
	var bad []string
	for i, r := range f.Runs {
		if c := r.Chaos; c != nil && (c.Unhealed > 0 || c.Split > 0) {
			bad = append(bad, fmt.Sprintf("run %d (seed %d): %d pairs unreachable, members seen %v", i+1, c.Seed, c.Unhealed, c.MembersSeen))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("bench cluster: not healed within --heal-within (every branch through every member, every member seeing all): %v", bad)
}
