// Package pgtest runs a throwaway PostgreSQL server for tests: one per test
// binary, on a free loopback port, in a temporary directory that is removed
// when the binary exits. Each Start call gets a fresh database on it.
//
// It needs PostgreSQL's server binaries (Debian's postgresql package, which
// `make test` installs where they are missing). initdb refuses to run as
// root, so as root the server runs as the "postgres" system user that
// Debian's package creates; otherwise as the current user.
//
// The server runs with fsync and synchronous_commit on: the store's tests
// check durability semantics, so a commit must mean what it means in
// production. Only initdb's own files are written with --no-sync.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvBin names a directory holding initdb and pg_ctl, searched first.
const EnvBin = "PGTEST_BIN"

// StartTimeout bounds how long the server may take to accept connections.
const StartTimeout = 60 * time.Second

var (
	once    sync.Once
	srv     *server
	srvErr  error
	dbCount atomic.Int64
)

// server is the one PostgreSQL server of this test binary.
type server struct {
	dir      string // temporary directory: data/, sock/, log
	bin      string // directory of initdb, pg_ctl, postgres
	port     int
	cred     *syscall.Credential // nil: run as the current user
	watchdog *exec.Cmd           // stops the server and removes dir when its stdin closes
	lifeline *os.File            // write end of the watchdog's stdin
}

// Start returns the URL of a fresh, empty database on this test binary's
// PostgreSQL server, starting the server on first use. The database is
// dropped when t ends. It fails t (never skips) when PostgreSQL is not
// installed or does not start.
func Start(t testing.TB) string {
	t.Helper()
	once.Do(func() { srv, srvErr = start() })
	if srvErr != nil {
		t.Fatalf("pgtest: %v", srvErr)
	}
	name := fmt.Sprintf("ctxinf_test_%d_%d", os.Getpid(), dbCount.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	if err := srv.exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
		defer cancel()
		// FORCE ends sessions a test left open (PostgreSQL 13 and later).
		if err := srv.exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return srv.url(name)
}

// Main runs the tests and then stops the server and removes its directory
// before the binary exits. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Without it, the server is stopped all the same when the binary exits
// (however it exits), by a watchdog process that waits for the binary's
// end; Main only makes the cleanup happen before the exit.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the server (if one was started) and removes its directory.
// Later Start calls fail.
func Stop() {
	once.Do(func() { srvErr = errors.New("the server was stopped") })
	if srv == nil {
		return
	}
	srv.stop()
	srv = nil
	srvErr = errors.New("the server was stopped")
}

// URL of database name on the server.
func (s *server) url(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, name)
}

func (s *server) exec(ctx context.Context, sql string) error {
	c, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, sql)
	return err
}

// FindBin returns the directory of PostgreSQL's server binaries: $PGTEST_BIN,
// then the newest /usr/lib/postgresql/<version>/bin, then the PATH.
func FindBin() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if d := os.Getenv(EnvBin); d != "" {
		if has(d) {
			return d, nil
		}
		return "", fmt.Errorf("%s=%s holds no initdb, pg_ctl and postgres", EnvBin, d)
	}
	vers, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(vers, func(i, j int) bool { return version(vers[i]) > version(vers[j]) })
	for _, d := range vers {
		if has(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if d := filepath.Dir(p); has(d) {
			return d, nil
		}
	}
	return "", errors.New("PostgreSQL's server binaries (initdb, pg_ctl, postgres) were not found in $" + EnvBin +
		", /usr/lib/postgresql/*/bin or the PATH: `make test` installs Debian's postgresql package " +
		"(or run: apt-get install postgresql)")
}

// version is the major version in /usr/lib/postgresql/<version>/bin.
func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// credential returns who the server runs as: nil for the current user, the
// "postgres" system user when the current user is root.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and initdb refuses root, but there is no \"postgres\" user "+
			"to run the server as (Debian's postgresql package creates it): %v", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user postgres: %v", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

func start() (*server, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ctxinf-pgtest-")
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir, bin: bin, cred: cred}
	ok := false
	defer func() {
		if !ok {
			s.stop()
		}
	}()
	if err := os.Mkdir(filepath.Join(dir, "sock"), 0o700); err != nil {
		return nil, err
	}
	if cred != nil {
		// MkdirTemp's directory is 0700: the server's user must own it.
		for _, p := range []string{dir, filepath.Join(dir, "sock")} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	if err := s.startWatchdog(); err != nil {
		return nil, fmt.Errorf("start the watchdog: %w", err)
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	conf := strings.Join([]string{
		"listen_addresses = '127.0.0.1'",
		"unix_socket_directories = '" + filepath.Join(dir, "sock") + "'",
		"fsync = on",
		"synchronous_commit = on",
		"full_page_writes = on",
		"max_connections = 200",
		"shared_buffers = 32MB",
		"max_wal_size = 256MB",
		"log_min_messages = warning",
		"",
	}, "\n")
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(conf)
	if err := errors.Join(err, f.Close()); err != nil {
		return nil, fmt.Errorf("write postgresql.conf: %w", err)
	}
	// A port found free may be taken before the server binds it: try a
	// few.
	var startErr error
	for range 3 {
		if s.port, err = freePort(); err != nil {
			return nil, err
		}
		out, err := s.run(filepath.Join(bin, "pg_ctl"), "-D", data, "-l", filepath.Join(dir, "log"),
			"-w", "-t", strconv.Itoa(int(StartTimeout.Seconds())), "-o", "-p "+strconv.Itoa(s.port), "start")
		if err == nil {
			startErr = nil
			break
		}
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		startErr = fmt.Errorf("pg_ctl start on port %d: %v\n%s\n%s", s.port, err, out, log)
	}
	if startErr != nil {
		return nil, startErr
	}
	if err := s.waitReady(); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// waitReady polls until the server accepts a connection, up to StartTimeout.
func (s *server) waitReady() error {
	deadline := time.Now().Add(StartTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := s.exec(ctx, "SELECT 1")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server on port %d accepts no connection after %v: %w", s.port, StartTimeout, err)
		}
		time.Sleep(20 * time.Millisecond) // the server is another process: nothing to wait on but a poll
	}
}

// run runs a PostgreSQL tool as the server's user in its directory.
func (s *server) run(path string, args ...string) ([]byte, error) {
	cmd := exec.Command(path, args...)
	s.prepare(cmd)
	return cmd.CombinedOutput()
}

func (s *server) prepare(cmd *exec.Cmd) {
	cmd.Dir = s.dir
	cmd.Env = []string{"PATH=" + s.bin + ":/usr/bin:/bin", "LANG=C", "LC_ALL=C", "HOME=" + s.dir}
	// Own process group: a ^C to the test binary reaches the watchdog's
	// cleanup, not the server directly.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.cred}
}

// startWatchdog starts a shell that waits for its stdin to close, which
// happens when this process exits or calls stop, then stops the server and
// removes its directory. It runs as the server's user, which owns dir.
func (s *server) startWatchdog() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	script := `read -r _; "$0" -D "$1/data" -m fast -w stop >/dev/null 2>&1; rm -rf "$1"`
	cmd := exec.Command("/bin/sh", "-c", script, filepath.Join(s.bin, "pg_ctl"), s.dir)
	s.prepare(cmd)
	cmd.Dir = "/"
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return err
	}
	r.Close()
	s.watchdog, s.lifeline = cmd, w
	return nil
}

// stop ends the server and removes its directory, through the watchdog.
func (s *server) stop() {
	if s.watchdog == nil {
		os.RemoveAll(s.dir)
		return
	}
	s.lifeline.Close()
	s.watchdog.Wait()
	s.watchdog = nil
	os.RemoveAll(s.dir) // in case the watchdog's user could not
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
