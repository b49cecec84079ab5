//go:build unix

package actors

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/contextinfinity/ctxinf/persistence"
)

// lockDir takes an exclusive lock on path (created if missing) for as
// long as the returned file is open: the lock Badger's directory gives a
// runtime on Badger, for one on PostgreSQL, whose store has no local
// files. Held by another process, it is persistence.ErrLocked, so that
// the commands that open the data directory ask its server instead.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, persistence.ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}
