package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/netcut"
	"github.com/contextinfinity/ctxinf/messages"
)

// clusterRun is one row of `ctxinf bench cluster`: the same load against
// one deployment (a single node on Badger or PostgreSQL, or the members
// of a cluster).
type clusterRun struct {
	Name    string `json:"name"`    // badger, postgres, cluster
	Store   string `json:"store"`   // badger or postgres
	Members int    `json:"members"` // processes serving the load
	// Committed is the turns that ended finalized; Failures the turns
	// that did not (failed, cut, or refused).
	Committed int     `json:"committed"`
	Failures  int     `json:"failures"`
	LoadS     float64 `json:"load_s"`      // wall time of the load phase
	TurnsPerS float64 `json:"turns_per_s"` // committed / load_s
	// From sending a turn to its first delta with text, and to its end.
	FirstDeltaP50us float64 `json:"first_delta_p50_us"`
	FirstDeltaP99us float64 `json:"first_delta_p99_us"`
	TurnP50us       float64 `json:"turn_p50_us"`
	TurnP99us       float64 `json:"turn_p99_us"`
	// Summed over the members at the end of the run:
	// ctxinf_cluster_forwarded_total and ctxinf_store_head_rejects_total.
	Forwarded   float64 `json:"forwarded"`
	HeadRejects float64 `json:"head_rejects"`
	// FirstError is the first failure's message, if any.
	FirstError string `json:"first_error,omitempty"`
	// Chaos is what --kills and --outages did, and how the cluster
	// healed after them.
	Chaos *chaosFigures `json:"chaos,omitempty"`
}

// ClusterFigures are the figures of `ctxinf bench cluster --json`.
type ClusterFigures struct {
	Branches    int          `json:"branches"`
	Turns       int          `json:"turns"`
	Concurrency int          `json:"concurrency"`
	LocalDelay  string       `json:"local_delay"`
	Runs        []clusterRun `json:"runs"`
}

// benchClusterUsage is the text of `bench cluster --help` above the flags.
const benchClusterUsage = `ctxinf bench cluster [flags]

Drives the same load through the HTTP API of --members ctxinf serve
--cluster processes sharing one PostgreSQL database and, with --baseline,
of one ctxinf serve on Badger and one on PostgreSQL without a cluster:
--branches sessions, --turns turns each, --concurrency clients at once
(client i sends through member i mod N), streamed over SSE with the local
model. A member creates only sessions it owns, and the sessions are
created through the members in turn and dealt to the clients in random
order: about (N-1)/N of the turns reach a member that does not own
their session and are forwarded to the one that does. It reports
committed turns/s, the time from sending a turn to its first delta and
to its end, the requests members forwarded to a session's owner and the
writes the store refused because their head had moved.

The servers are child processes of --bin on free loopback ports, with
data directories (and their logs) under --dir. PostgreSQL: the server of
the URL in the environment variable store.postgres_url_env names
(CTX_STORE_POSTGRES_URL by default), whose user must be allowed to
CREATE DATABASE: each PostgreSQL run creates a database of its own there
(ctxinf_bench_<pid>_<n>) and drops it afterwards; nothing else on that
server is touched (an interrupted run leaves its database behind). The
load, the servers and PostgreSQL share this machine's CPUs unless the
URL names another one.

`

// Cluster is `ctxinf bench cluster`.
func Cluster(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("bench cluster", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	fs.Usage = func() {
		fmt.Fprint(e.Stderr, benchClusterUsage)
		fs.PrintDefaults()
	}
	members := fs.Int("members", 3, "cluster members (serve --cluster processes)")
	branches := fs.Int("branches", 200, "sessions driven, one branch each")
	turns := fs.Int("turns", 10, "turns per branch")
	conc := fs.Int("concurrency", 32, "clients sending at once (each with one turn in flight)")
	baseline := fs.Bool("baseline", true, "also run the load against one serve on Badger and one on PostgreSQL, no cluster")
	delay := fs.Duration("local-delay", 0, "the local model's delay between streamed tokens (local.delay)")
	bin := fs.String("bin", "", "the ctxinf binary the servers run (default: this one)")
	dir := fs.String("dir", "", "directory of the servers' data and logs (default: a temporary one, removed afterwards)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	var ch chaosPlan
	ch.flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := ch.check(); err != nil {
		return fmt.Errorf("bench cluster: %w", err)
	}
	switch {
	case *members < 1 || *members > 16:
		return fmt.Errorf("bench cluster: --members is %d, want 1 to 16", *members)
	case *branches < 1:
		return fmt.Errorf("bench cluster: --branches is %d, want at least 1", *branches)
	case *turns < 1:
		return fmt.Errorf("bench cluster: --turns is %d, want at least 1", *turns)
	case *conc < 1:
		return fmt.Errorf("bench cluster: --concurrency is %d, want at least 1", *conc)
	case *delay < 0:
		return fmt.Errorf("bench cluster: --local-delay is %v, want 0 or more", *delay)
	}
	envName := e.Config.Store.PostgresURLEnv
	pgURL := strings.TrimSpace(os.Getenv(envName))
	if pgURL == "" {
		return fmt.Errorf("bench cluster: the environment variable %s (store.postgres_url_env) is not set: set it to the URL "+
			"of a PostgreSQL server whose user may CREATE DATABASE (postgres://user:password@host:port/db); "+
			"each run creates a database of its own there and drops it afterwards", envName)
	}
	if *bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench cluster: this binary's path (give --bin): %w", err)
		}
		*bin = exe
	}
	path, done, err := cli.WorkDir(*dir, "ctxinf-bench-cluster-")
	if err != nil {
		return err
	}
	defer done()
	b := &clusterBench{warn: e.Stderr, bin: *bin, dir: path, pgURL: pgURL, delay: *delay,
		branches: *branches, turns: *turns, conc: *conc, chaos: ch}
	f := ClusterFigures{Branches: *branches, Turns: *turns, Concurrency: *conc, LocalDelay: delay.String()}
	type plan struct {
		name, store string
		members     int
	}
	var plans []plan
	if *baseline && !ch.on() {
		plans = append(plans, plan{"badger", "badger", 1}, plan{"postgres", "postgres", 1})
	}
	for range max(ch.runs, 1) {
		plans = append(plans, plan{"cluster", "postgres", *members})
	}
	for _, p := range plans {
		r, err := b.run(p.name, p.store, p.members)
		if err != nil {
			return fmt.Errorf("bench cluster: %s: %w", p.name, err)
		}
		f.Runs = append(f.Runs, r)
	}
	if *asJSON {
		if err := json.NewEncoder(e.Stdout).Encode(f); err != nil {
			return err
		}
	} else {
		printClusterFigures(e.Stdout, f)
	}
	return unhealed(f)
}

func printClusterFigures(w io.Writer, f ClusterFigures) {
	fmt.Fprintf(w, "%d branches x %d turns, %d clients at once, local model (delay %s)\n",
		f.Branches, f.Turns, f.Concurrency, f.LocalDelay)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "run\tmembers\tturns/s\tvs badger\tfirst delta p50 ms\tp99 ms\tturn p50 ms\tp99 ms\tforwarded\thead rejects\tfailures\t\n")
	var base float64
	for _, r := range f.Runs {
		if r.Name == "badger" {
			base = r.TurnsPerS
		}
	}
	for _, r := range f.Runs {
		ratio := "-"
		if base > 0 {
			ratio = fmt.Sprintf("%.2f", r.TurnsPerS/base)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%d\t\n", r.Name, r.Members, r.TurnsPerS, ratio,
			r.FirstDeltaP50us/1e3, r.FirstDeltaP99us/1e3, r.TurnP50us/1e3, r.TurnP99us/1e3, r.Forwarded, r.HeadRejects, r.Failures)
	}
	tw.Flush()
	for _, r := range f.Runs {
		if r.FirstError != "" {
			fmt.Fprintf(w, "%s: first failure: %s\n", r.Name, r.FirstError)
		}
	}
	printChaosFigures(w, f)
}

// clusterBench is one `bench cluster` invocation's settings.
type clusterBench struct {
	bin, dir, pgURL       string
	warn                  io.Writer // where a failed cleanup is said
	delay                 time.Duration
	branches, turns, conc int
	chaos                 chaosPlan
}

// run starts n servers on store (a cluster when store is postgres and
// n > 1), drives the load through them, and stops them.
func (b *clusterBench) run(name, store string, n int) (clusterRun, error) {
	ctx := context.Background()
	r := clusterRun{Name: name, Store: store, Members: n}
	var dbURL string
	if store == "postgres" {
		u, drop, err := freshDatabase(ctx, b.pgURL)
		if err != nil {
			return r, err
		}
		defer func() {
			if err := drop(); err != nil {
				fmt.Fprintf(b.warn, "bench cluster: %v\n", err)
			}
		}()
		dbURL = u
	}
	chaos := b.chaos.on() && store == "postgres" && n > 1
	var db *netcut.Proxy
	if chaos {
		// The members reach the database through a proxy the outages cut.
		p, proxied, err := proxyDatabase(dbURL)
		if err != nil {
			return r, err
		}
		defer p.Close()
		db, dbURL = p, proxied
	}
	// Each server's ports: HTTP, frame protocol, cluster management,
	// cluster remoting.
	ports, err := freePorts(4 * n)
	if err != nil {
		return r, err
	}
	port := func(i, k int) string { return strconv.Itoa(ports[4*i+k]) }
	peers := make([]string, n)
	for i := range n {
		peers[i] = "127.0.0.1:" + port(i, 2)
	}
	cluster := store == "postgres" && n > 1
	procs := make([]*benchProc, 0, n)
	defer func() { stopProcs(procs) }()
	for i := range n {
		addr := "127.0.0.1:" + port(i, 0)
		data := filepath.Join(b.dir, fmt.Sprintf("%s-%d", name, i))
		if chaos {
			data = filepath.Join(b.dir, fmt.Sprintf("%s%d-%d", name, b.chaos.ran+1, i)) // run k's members
		}
		env := []string{"CTX_DATA_DIR=" + data, "CTX_LOG_LEVEL=warn", "CTX_DEFAULT_MODEL=local",
			"CTX_LOCAL_DELAY=" + b.delay.String(), "CTX_SERVER_FRAME_ADDR=127.0.0.1:" + port(i, 1),
			"CTX_STORE_BACKEND=" + store}
		if store == "postgres" {
			env = append(env, "CTX_STORE_POSTGRES_URL_ENV=CTX_STORE_POSTGRES_URL", "CTX_STORE_POSTGRES_URL="+dbURL)
		}
		args := []string{"serve", "--addr", addr}
		if cluster {
			args = append(args, "--cluster")
			env = append(env, "CTX_CLUSTER_PORT="+port(i, 3), "CTX_CLUSTER_MANAGE_PORT="+port(i, 2),
				"CTX_CLUSTER_PEERS="+strings.Join(peers, ","))
		}
		p, err := startProc(b.bin, addr, args, env, data)
		if err != nil {
			return r, err
		}
		procs = append(procs, p)
	}
	want := 0
	if cluster {
		want = n
	}
	if err := waitServing(ctx, procs, want, 90*time.Second); err != nil {
		return r, err
	}
	urls := make([]string, n)
	for i, p := range procs {
		urls[i] = p.url
	}
	var (
		startChaos func([]messages.BranchID) <-chan struct{}
		chaosRes   = make(chan chaosFigures, 1)
	)
	if chaos {
		startChaos = func(branches []messages.BranchID) <-chan struct{} {
			done := make(chan struct{})
			go func() {
				cf := b.chaos.run(procs, db)
				close(done) // the load stops; the reads begin at once
				cf.heal(ctx, urls, branches, b.chaos.healWithin)
				chaosRes <- cf
			}()
			return done
		}
	}
	if _, err := b.drive(ctx, urls, &r, startChaos); err != nil {
		return r, err
	}
	if chaos {
		cf := <-chaosRes
		r.Chaos = &cf
	}
	for _, p := range procs {
		r.Forwarded += scrapeMetric(p.url, "ctxinf_cluster_forwarded_total")
		r.HeadRejects += scrapeMetric(p.url, "ctxinf_store_head_rejects_total")
	}
	return r, nil
}

// drive creates the sessions through the servers at urls round robin,
// then sends the turns: client w of b.conc sends through urls[w % n],
// one turn in flight, over its share of the branches (every conc-th of
// them in random order), a turn on each in turn until each has had
// b.turns.
//
// With chaos, drive calls it with the branches once the sessions are
// created, and the clients go on past b.turns until the channel it
// returned is closed. It returns the branches.
func (b *clusterBench) drive(ctx context.Context, urls []string, r *clusterRun, chaos func([]messages.BranchID) <-chan struct{}) ([]messages.BranchID, error) {
	clients := make([]*client.Client, len(urls))
	for i, u := range urls {
		clients[i] = client.New(u, client.WithHTTPClient(&http.Client{
			Transport: &http.Transport{MaxIdleConnsPerHost: b.conc, MaxIdleConns: b.conc * len(urls)}}))
	}
	branches := make([]messages.BranchID, b.branches)
	for i := range branches {
		_, br, err := clients[i%len(clients)].CreateSession(ctx, fmt.Sprint("bench cluster ", i))
		if err != nil {
			return nil, fmt.Errorf("create session %d through %s: %w", i, urls[i%len(urls)], err)
		}
		branches[i] = br.ID
	}
	// A member creates only sessions it owns (it draws their ids so), so
	// branch i's owner is the member it was created through. Dealt to
	// the clients in random order, a turn reaches its owner with
	// probability 1/n and is forwarded otherwise, as with clients that
	// do not know the placement.
	rand.Shuffle(len(branches), func(i, j int) { branches[i], branches[j] = branches[j], branches[i] })
	var until <-chan struct{}
	if chaos != nil {
		until = chaos(branches)
	}
	var (
		mu          sync.Mutex
		first, took []time.Duration
		wg          sync.WaitGroup
	)
	t0 := time.Now()
	for w := range min(b.conc, b.branches) {
		c := clients[w%len(clients)]
		wg.Go(func() {
			for t := 0; t < b.turns || !closed(until); t++ {
				for i := w; i < len(branches); i += b.conc {
					sent := time.Now()
					var at time.Duration
					res, err := c.Stream(ctx, branches[i], fmt.Sprintf("turn %d of benchmark branch %d", t, i),
						func(ev client.Event) error {
							if ev.Type == "delta" && ev.Text != "" && at == 0 {
								at = time.Since(sent)
							}
							return nil
						})
					end := time.Since(sent)
					ok := err == nil && res.Phase >= messages.PhaseResponseFinalized && res.Phase != messages.PhaseFailed
					mu.Lock()
					if ok {
						r.Committed++
						took = append(took, end)
						if at > 0 {
							first = append(first, at)
						}
					} else {
						r.Failures++
						if r.FirstError == "" {
							if err == nil {
								err = fmt.Errorf("the turn ended %s", res.Phase)
							}
							r.FirstError = err.Error()
						}
					}
					mu.Unlock()
					if !ok && until != nil {
						time.Sleep(100 * time.Millisecond) // a member or the database is down: do not spin
					}
				}
			}
		})
	}
	wg.Wait()
	load := time.Since(t0)
	r.LoadS = load.Seconds()
	r.TurnsPerS = float64(r.Committed) / load.Seconds()
	r.FirstDeltaP50us, r.FirstDeltaP99us = micros(percentile(first, 50)), micros(percentile(first, 99))
	r.TurnP50us, r.TurnP99us = micros(percentile(took, 50)), micros(percentile(took, 99))
	return branches, nil
}

// closed reports whether c is closed (true for nil).
func closed(c <-chan struct{}) bool {
	if c == nil {
		return true
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// benchDatabases numbers the databases freshDatabase creates.
var benchDatabases int

// freshDatabase creates an empty database on the PostgreSQL server of
// base (a postgres:// URL, connected to as given) and returns its URL,
// with drop, which drops it.
func freshDatabase(ctx context.Context, base string) (string, func() error, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, errors.New("the PostgreSQL URL is not a postgres:// URL (postgres://user:password@host:port/db)")
	}
	benchDatabases++
	name := fmt.Sprintf("ctxinf_bench_%d_%d", os.Getpid(), benchDatabases)
	do := func(sql string) error {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		c, err := pgx.Connect(cctx, base)
		if err != nil {
			return fmt.Errorf("connect to PostgreSQL: %w", err)
		}
		defer c.Close(context.Background())
		_, err = c.Exec(cctx, sql)
		return err
	}
	if err := do("CREATE DATABASE " + name); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path = "/" + name
	return u.String(), func() error {
		if err := do("DROP DATABASE IF EXISTS " + name); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}, nil
}

// freePorts returns n distinct loopback ports free when it looked.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// benchProc is a `ctxinf serve` child process.
type benchProc struct {
	cmd  *exec.Cmd
	url  string
	log  string // its stdout and stderr
	done chan struct{}
	err  error // its exit, once done is closed
	// What started it, to start it again (restart).
	bin, addr, dir string
	args, env      []string
}

// startProc starts bin with args (serving HTTP on addr) and the extra environment variables,
// its output in dir/serve.log.
func startProc(bin, addr string, args, env []string, dir string) (*benchProc, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "serve.log")
	fh, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644) // a restart's log follows
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...) // the last value of a key wins
	cmd.Stdout, cmd.Stderr = fh, fh
	if err := cmd.Start(); err != nil {
		fh.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &benchProc{cmd: cmd, url: "http://" + addr, log: logPath, done: make(chan struct{}),
		bin: bin, addr: addr, args: args, env: env, dir: dir}
	go func() {
		p.err = cmd.Wait()
		fh.Close()
		close(p.done)
	}()
	return p, nil
}

// logTail is the end of p's log, for an error.
func (p *benchProc) logTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// stopProcs sends SIGTERM to every process and waits for them (killing
// one still running after 30 s).
func stopProcs(ps []*benchProc) {
	for _, p := range ps {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range ps {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// waitServing waits until every process answers /readyz with 200 and,
// when members > 0, counts members in ctxinf_cluster_members.
func waitServing(ctx context.Context, ps []*benchProc, members int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for _, p := range ps {
		for {
			select {
			case <-p.done:
				return fmt.Errorf("%s exited before it was ready (%v); its log ends:\n%s", p.url, p.err, p.logTail())
			default:
			}
			if ready(ctx, p.url) && (members == 0 || scrapeMetric(p.url, "ctxinf_cluster_members") == float64(members)) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not ready after %v (want /readyz 200 and %d members); its log ends:\n%s",
					p.url, limit, members, p.logTail())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// ready reports whether the server at url answers /readyz with 200.
func ready(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// scrapeMetric returns the value of an unlabelled counter or gauge in
// the server's /metrics; 0 when it is not there.
func scrapeMetric(url, name string) float64 {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
