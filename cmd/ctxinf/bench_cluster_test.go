package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextinfinity/ctxinf/internal/cli/bench"
	"github.com/contextinfinity/ctxinf/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// buildCtxinf builds this command once for the tests that run it as
// servers.
func buildCtxinf(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ctxinf-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "ctxinf")
		if out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build ctxinf: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// bench cluster --kills --outages --pauses SIGKILLs members, cuts the
// database and stalls a member (SIGSTOP, longer than a membership poll
// waits) while the load runs, then reads every branch through every
// member: each answers within --heal-within.
func TestBenchClusterChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ctxinf and runs three servers, killing them")
	}
	pg := pgtest.Start(t)
	bin := buildCtxinf(t)
	t.Setenv("CTX_STORE_POSTGRES_URL", pg)
	const branches, members, heal = 24, 3, 45 * time.Second
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "cluster", "--members", "3", "--branches", strconv.Itoa(branches), "--turns", "2",
		"--concurrency", "6", "--kills", "3", "--outages", "2", "--outage-for", "1s", "--pauses", "1", "--pause-for", "4s", "--chaos-every", "1s",
		"--heal-within", heal.String(), "--seed", "21", "--json", "--bin", bin}, nil, &out, &errOut)
	var f bench.ClusterFigures
	if err := json.Unmarshal(out.Bytes(), &f); err != nil {
		t.Fatalf("exit %d, output is not one JSON object: %v\n%s\n%s", code, err, out.String(), errOut.String())
	}
	if len(f.Runs) != 1 || f.Runs[0].Name != "cluster" || f.Runs[0].Chaos == nil {
		t.Fatalf("want one cluster run with chaos figures: %s", out.String())
	}
	c := f.Runs[0].Chaos
	t.Logf("chaos: %+v", *c)
	if c.Kills != 3 || c.Outages != 2 || c.Pauses != 1 || c.Seed != 21 || c.Pairs != branches*members {
		t.Errorf("%d kills, %d outages, %d pauses, seed %d, %d pairs; want 3, 2, 1, 21, %d", c.Kills, c.Outages, c.Pauses, c.Seed,
			c.Pairs, branches*members)
	}
	if c.Unhealed != 0 || c.HealS < 0 || c.HealS > heal.Seconds() || code != 0 {
		t.Errorf("exit %d: %d branch-member pairs unreachable %v after the chaos (%s): %s", code, c.Unhealed, heal, c.HealError, errOut.String())
	}
}

// bench cluster runs the same load against a Badger node, a PostgreSQL
// node and three members, as processes of the ctxinf binary, and drops
// the databases it created.
func TestBenchClusterJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ctxinf and runs five servers")
	}
	pg := pgtest.Start(t)
	bin := buildCtxinf(t)
	t.Setenv("CTX_STORE_POSTGRES_URL", pg)
	var out, errOut bytes.Buffer
	const branches, turns = 12, 2
	if code := run([]string{"bench", "cluster", "--members", "3", "--branches", "12", "--turns", "2",
		"--concurrency", "6", "--json", "--bin", bin}, nil, &out, &errOut); code != 0 {
		t.Fatalf("bench cluster exited %d: %s", code, errOut.String())
	}
	var f bench.ClusterFigures
	if err := json.Unmarshal(out.Bytes(), &f); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out.String())
	}
	if f.Branches != branches || f.Turns != turns || f.Concurrency != 6 {
		t.Errorf("settings %d branches, %d turns, %d clients; want %d, %d, 6", f.Branches, f.Turns, f.Concurrency, branches, turns)
	}
	want := []struct {
		name, store string
		members     int
	}{{"badger", "badger", 1}, {"postgres", "postgres", 1}, {"cluster", "postgres", 3}}
	if len(f.Runs) != len(want) {
		t.Fatalf("%d runs, want %d: %s", len(f.Runs), len(want), out.String())
	}
	for i, w := range want {
		r := f.Runs[i]
		if r.Name != w.name || r.Store != w.store || r.Members != w.members {
			t.Errorf("run %d is %s on %s with %d members, want %s on %s with %d", i, r.Name, r.Store, r.Members, w.name, w.store, w.members)
		}
		if r.Committed != branches*turns || r.Failures != 0 || r.FirstError != "" {
			t.Errorf("%s: %d committed, %d failed (%q), want %d committed", r.Name, r.Committed, r.Failures, r.FirstError, branches*turns)
		}
		if !(r.TurnsPerS > 0) || !(r.LoadS > 0) {
			t.Errorf("%s: %v turns/s over %v s, want positive", r.Name, r.TurnsPerS, r.LoadS)
		}
		if !(r.FirstDeltaP50us > 0 && r.FirstDeltaP50us <= r.FirstDeltaP99us && r.TurnP50us <= r.TurnP99us &&
			r.FirstDeltaP50us <= r.TurnP50us) {
			t.Errorf("%s: first delta p50/p99 %v/%v us, turn %v/%v us: want 0 < p50 <= p99 and the first delta before the end",
				r.Name, r.FirstDeltaP50us, r.FirstDeltaP99us, r.TurnP50us, r.TurnP99us)
		}
		// Three members own about a third of the sessions each, and the
		// clients send through all of them: with 12 sessions, every turn
		// reaching its owner has probability 3^-12.
		if (w.members > 1) != (r.Forwarded > 0) || r.HeadRejects < 0 {
			t.Errorf("%s: %v forwarded, %v head rejects", r.Name, r.Forwarded, r.HeadRejects)
		}
	}

	// The databases the runs created are gone.
	ctx := context.Background()
	c, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var left int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname LIKE 'ctxinf_bench_%'").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d ctxinf_bench_ databases left on the server, want 0", left)
	}
}

// Without a PostgreSQL URL, or with a bad flag, bench cluster refuses,
// naming what is missing.
func TestBenchClusterRefuses(t *testing.T) {
	t.Setenv("CTX_STORE_POSTGRES_URL", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "CTX_STORE_POSTGRES_URL (store.postgres_url_env) is not set"},
		{[]string{"--members", "0"}, "--members is 0"},
		{[]string{"--branches", "0"}, "--branches is 0"},
		{[]string{"--turns", "0"}, "--turns is 0"},
		{[]string{"--concurrency", "0"}, "--concurrency is 0"},
	} {
		var out, errOut bytes.Buffer
		code := run(append([]string{"bench", "cluster"}, c.args...), nil, &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("bench cluster %v: exit %d, %q; want a failure saying %q", c.args, code, errOut.String(), c.want)
		}
	}
}
