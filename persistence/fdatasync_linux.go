package persistence

import (
	"io/fs"
	"os"
	"syscall"
)

// fdatasync flushes f's data (and the metadata needed to read it back) but
// not its timestamps: Badger preallocates its logs, so a write changes no
// size, and the flush needs no journal commit.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
		}
		return nil
	}
}
