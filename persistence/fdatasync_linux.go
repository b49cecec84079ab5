package persistence

import (
	"io/fs"
	"os"
	"syscall"
)

// Fdatasync flushes f's data and the metadata needed to read it back (its
// size), not its timestamps (an fsync where there is no fdatasync). Into
// blocks written before, that is a flush of data only; a write that
// reaches a block of a sparse file for the first time allocates it, and
// the flush then commits the file system's journal too. The journal
// segments, Badger's redo log and the benchmarks' floors use it.
func Fdatasync(f *os.File) error {
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
