//go:build unix

package persistence

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Lock takes an exclusive lock (flock) on the file or directory at path,
// held until the returned file is closed: Badger's lock on its directory,
// and a runtime's on its data directory when its store has no local
// files. With create a missing file is created; without, a missing path
// is an fs.ErrNotExist error. Held by another process, it is ErrLocked;
// where there is no flock, errors.ErrUnsupported.
func Lock(path string, create bool) (*os.File, error) {
	var f *os.File
	var err error
	if create {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	} else {
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}
