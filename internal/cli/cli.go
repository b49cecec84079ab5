// Package cli is what the commands of the ctxinf binaries share: the
// environment each command gets (Env: the validated configuration, the
// root logger, the output streams), the run of a command line over a
// table of commands (Main), and the ways a command reaches the data
// directory: its store, its runtime, or the server that owns it.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/wiring"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
	"github.com/contextinfinity/ctxinf/persistence/pgdb"
	"github.com/contextinfinity/ctxinf/providers"
)

// Env is what every command gets: validated config, the root logger and
// the output streams.
type Env struct {
	Config config.Config
	// StoreKey encrypts the store at rest (store.encryption); nil: off.
	StoreKey []byte
	Log      zerolog.Logger
	Scrub    *providers.Scrubber // the known secrets: out of the log and every stored error
	Stdin    io.Reader
	Stdout   io.Writer
	Stderr   io.Writer
	// Program and Version name the binary, as `version` prints them.
	Program, Version string
}

// Command is one command of a binary: its words ("serve", "bench
// store") and what runs it with the arguments after them.
type Command struct {
	Name string
	Run  func(e *Env, args []string) error
}

// Main runs the command line args (without the program name) over
// commands and returns the exit code: 0, 1 when the command failed, 2 for
// a bad command line or configuration. The global flag --config names
// the configuration file; `version` and `help` need none.
func Main(program, version, usage string, commands []Command, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(program, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	cfgPath := fs.String("config", "", "configuration file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return 2
	}
	switch rest[0] {
	case "version":
		fmt.Fprintln(stdout, program, version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", program, err)
		return 2
	}
	if n := cfg.Runtime.MemoryLimitBytes; n > 0 && os.Getenv("GOMEMLIMIT") == "" {
		lim := &memoryLimit{configured: n, set: debug.SetMemoryLimit, live: liveHeap}
		lim.watch()
		defer lim.stop()
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(cfg.Runtime.GCPercent)
	}
	key, err := cfg.EncryptionKey()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", program, err)
		return 2
	}
	scrub := wiring.Scrubber(cfg, os.Getenv)
	e := &Env{Config: cfg, StoreKey: key, Log: wiring.Logger(cfg.Log, stderr, scrub), Scrub: scrub,
		Stdin: stdin, Stdout: stdout, Stderr: stderr, Program: program, Version: version}
	cmd, n := find(commands, rest)
	if cmd == nil {
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n%s", program, strings.Join(rest[:min(len(rest), 2)], " "), usage)
		return 2
	}
	err = cmd.Run(e, rest[n:])
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		e.Log.Error().Err(err).Msg("command failed")
		fmt.Fprintf(stderr, "%s: %v\n", program, e.Scrub.String(err.Error()))
		return 1
	}
	return 0
}

// find returns the command whose words begin args, and how many words
// they are.
func find(commands []Command, args []string) (*Command, int) {
	for i, c := range commands {
		words := strings.Fields(c.Name)
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			return &commands[i], len(words)
		}
	}
	return nil, 0
}

// StoreOptions are Badger's options for a store in dir (wiring.StoreOptions).
func (e *Env) StoreOptions(dir string) badgerdb.Options {
	return wiring.StoreOptions(e.Config, e.StoreKey, e.Log, dir)
}

// OpenStore opens the data directory's store for a command that reads it
// without a runtime (inspect): Badger's in {DataDir}/store, or the
// PostgreSQL database of store.backend postgres. A nil Database and the
// error when it cannot.
func (e *Env) OpenStore(ctx context.Context) (persistence.Database, error) {
	pg, err := wiring.PostgresOptions(e.Config, e.Log)
	if err != nil {
		return nil, err
	}
	if pg != nil {
		db, err := pgdb.OpenPostgresDB(ctx, *pg)
		if err != nil {
			return nil, err
		}
		return db, nil
	}
	db, err := badgerdb.Open(e.StoreOptions(filepath.Join(e.Config.DataDir, "store")))
	if err != nil {
		return nil, err
	}
	return db, nil
}

// RuntimeConfig maps the configuration onto the runtime's (wiring.Runtime),
// with the API keys from the environment.
func (e *Env) RuntimeConfig() (actors.Config, error) {
	return wiring.Runtime(e.Config, wiring.Env{Log: e.Log, Scrub: e.Scrub, StoreKey: e.StoreKey, Getenv: os.Getenv})
}

// OpenRuntime opens the runtime of the configuration on its data directory.
func (e *Env) OpenRuntime(ctx context.Context) (*ctxinf.Runtime, error) {
	cfg, err := e.RuntimeConfig()
	if err != nil {
		return nil, err
	}
	return e.OpenRuntimeWith(ctx, cfg)
}

// OpenRuntimeWith opens the runtime configured as cfg (a RuntimeConfig the
// command changed).
func (e *Env) OpenRuntimeWith(ctx context.Context, cfg actors.Config) (*ctxinf.Runtime, error) {
	rt, err := ctxinf.Open(ctx, ctxinf.Options{Config: &cfg})
	if err != nil {
		return nil, fmt.Errorf("open runtime in %s: %w", e.Config.DataDir, err)
	}
	return rt, nil
}
