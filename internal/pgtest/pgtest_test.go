package pgtest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	if os.Getenv("PGTEST_CHILD") != "" {
		child()
		return
	}
	code := m.Run()
	var dir string
	if srv != nil {
		dir = srv.dir
	}
	Stop()
	if dir != "" {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			fmt.Fprintf(os.Stderr, "pgtest: %s is still there after Stop (%v)\n", dir, err)
			code = 1
		}
	}
	os.Exit(code)
}

// child starts a server, prints its directory and exits without Stop, as a
// test binary that panicked or was killed would.
func child() {
	once.Do(func() { srv, srvErr = start() })
	if srvErr != nil {
		fmt.Println("error", srvErr)
		os.Exit(2)
	}
	fmt.Println("dir", srv.dir)
	os.Exit(0)
}

func query(t *testing.T, url, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var s string
	if strings.HasPrefix(sql, "CREATE") {
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return ""
	}
	if err := c.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func TestStart(t *testing.T) {
	a, b := Start(t), Start(t)
	if a == b {
		t.Fatalf("two Start calls gave one database: %s", a)
	}
	if !strings.HasPrefix(a, "postgres://postgres@127.0.0.1:") {
		t.Fatalf("URL %s is not on loopback", a)
	}
	for _, tc := range []struct{ sql, want string }{
		{"SHOW fsync", "on"},
		{"SHOW synchronous_commit", "on"},
		{"SELECT current_user", "postgres"},
		{"SELECT count(*)::text FROM pg_tables WHERE schemaname = 'public'", "0"},
	} {
		if got := query(t, a, tc.sql); got != tc.want {
			t.Errorf("%s = %q, want %q", tc.sql, got, tc.want)
		}
	}
	// The databases are distinct: a table made in one is not in the other.
	query(t, a, "CREATE TABLE only_in_a (x int)")
	if got := query(t, b, "SELECT count(*)::text FROM pg_tables WHERE tablename = 'only_in_a'"); got != "0" {
		t.Fatalf("a table of database a is in database b")
	}
	// The server does not run as root.
	if os.Geteuid() == 0 {
		fi, err := os.Stat(srv.dir + "/data")
		if err != nil {
			t.Fatal(err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid == 0 {
			t.Fatal("the data directory belongs to root")
		}
	}
}

// TestNoLeftovers runs a test binary that starts a server and exits without
// Stop: the watchdog must stop the server and remove its directory.
func TestNoLeftovers(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PGTEST_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var dir string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "dir "); ok {
			dir = d
		}
	}
	if dir == "" {
		t.Fatalf("child printed no directory:\n%s", out)
	}
	deadline := time.Now().Add(StartTimeout)
	for {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still there %v after its test binary exited", dir, StartTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
