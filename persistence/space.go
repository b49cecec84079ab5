package persistence

import (
	"errors"
	"fmt"
	"time"
)

// ErrNoSpace is matched (errors.Is) by the *SpaceError of a write that the
// store refused because its file system is short of free space.
var ErrNoSpace = errors.New("persistence: insufficient storage")

// ServerFullHold is how long, after a database server reported its disk
// full (PostgreSQL's SQLSTATE 53100, disk_full) on a group, the engine's
// CheckSpace refuses new work. A group that commits ends it at once;
// after it, new work is let through again, and its write finds out
// whether the server has room.
const ServerFullHold = 10 * time.Second

// SpaceError is the error of a write refused for lack of free space: the
// file system of Dir had Free bytes free, and the write needed Need
// (MinFree, Options.MinFreeBytes, for new work; half of it for any write).
//
// On a database server (Server set, package pgdb) it is the
// server that reported its disk full: Err, the failed write's error, or,
// for new work refused after it, Since, how long ago.
type SpaceError struct {
	Dir     string
	Free    int64
	Need    int64
	MinFree int64

	Server string
	Err    error
	Since  time.Duration
}

func (e *SpaceError) Error() string {
	if e.Server != "" {
		if e.Err != nil {
			return fmt.Sprintf("persistence: insufficient storage: the %s server's disk is full: %v", e.Server, e.Err)
		}
		return fmt.Sprintf("persistence: insufficient storage: the %s server reported its disk full %s ago; "+
			"new work is refused for %s after that: free space on the server's disk",
			e.Server, e.Since.Round(time.Millisecond), ServerFullHold)
	}
	what := fmt.Sprintf("new work needs %d (store.min_free_bytes)", e.Need)
	if e.Need < e.MinFree {
		what = fmt.Sprintf("any write needs %d (half of store.min_free_bytes, %d)", e.Need, e.MinFree)
	}
	return fmt.Sprintf("persistence: insufficient storage: the file system of %s has %d bytes free, and %s: free at least %d bytes",
		e.Dir, e.Free, what, e.Need-e.Free)
}

func (e *SpaceError) Is(target error) bool { return target == ErrNoSpace }

func (e *SpaceError) Unwrap() error { return e.Err }

// CheckSpace returns the *SpaceError of s if its engine measures its
// free space (Badger: its file system; PostgreSQL: a disk_full from the
// server), nil for other stores.
func CheckSpace(s Store) error {
	if c, ok := s.(interface{ CheckSpace() error }); ok {
		return c.CheckSpace()
	}
	return nil
}
