//go:build unix

package badgerdb

import (
	"errors"
	"os"
	"syscall"
)

// lockBadgerDir takes the lock Badger takes on its directory (flock on
// the directory itself) until unlock is called. ok is false, with no
// error, when another process holds it or the directory does not exist.
func lockBadgerDir(dir string) (unlock func(), ok bool, err error) {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, true, nil
}
