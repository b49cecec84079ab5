package persistence

import (
	"io/fs"
	"os"
	"syscall"
)

// fdatasync flushes f's data and the metadata needed to read it back (its
// size), not its timestamps.
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

// punchHole frees the blocks of f that [off, off+n) covers and zeroes
// what it covers of the others, keeping f's size
// (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE). A file system without
// holes answers an error, and the caller writes zeros.
func punchHole(f *os.File, off, n int64) error {
	const punchHoleKeepSize = 0x02 | 0x01
	for {
		err := syscall.Fallocate(int(f.Fd()), punchHoleKeepSize, off, n)
		if err == syscall.EINTR {
			continue
		}
		return err
	}
}
