package badgerdb

import (
	"io/fs"
	"os"
	"syscall"
)

// fdatasync flushes f's data (and the metadata needed to read it back) but
// not its timestamps. Into blocks written before (the redo log's), that is
// a flush of data only. Badger's logs are sparse: a write that reaches a
// block of one for the first time allocates it, and the flush then commits
// the file system's journal too.
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
