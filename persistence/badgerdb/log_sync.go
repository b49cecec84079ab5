package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Badger's SyncWrites syncs two files per write: the value log, even when
// the write put nothing in it, and then the memtable's WAL. Each sync is a
// device flush, and on a busy disk the second doubles the tail of every
// commit. So the store opens Badger without SyncWrites and syncs only the
// files a group wrote: the WAL always, the value log when one of its
// values was at least the value threshold (Badger writes shorter ones into
// the WAL and the LSM tree, and nothing else writes the value log but
// value-log GC; see badgerStore.runValueLogGC). With a redo log (redo.go),
// it does so at the log's checkpoints, and for groups too big for it;
// without one, after every group.
//
// A log file is found by its name. Badger numbers both kinds in sequence
// (%05d.mem, %06d.vlog) and writes only the newest of each, so a logTail
// keeps the newest file open and, before each sync, looks for the next
// number: a rotation since the last sync. The files it rotates past are
// synced too, since the write may have begun in them, and so is the
// directory, for the new file's entry. A WAL file that is gone was flushed
// into a table, which Badger syncs.

// logTail tracks the newest log file of one kind in a directory.
type logTail struct {
	dir   string
	ext   string // ".mem" or ".vlog"
	width int    // digits in the file number
	fid   int    // the newest file's number; 0: none yet
	f     *os.File
}

func (t *logTail) path(fid int) string {
	return filepath.Join(t.dir, fmt.Sprintf("%0*d%s", t.width, fid, t.ext))
}

// logFids returns the numbers of dir's log files with extension ext.
func logFids(dir, ext string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var fids []int
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ext); ok {
			if fid, err := strconv.Atoi(name); err == nil {
				fids = append(fids, fid)
			}
		}
	}
	return fids, nil
}

// openLogTail finds the newest log file with extension ext in dir.
func openLogTail(dir, ext string, width int) (*logTail, error) {
	t := &logTail{dir: dir, ext: ext, width: width}
	fids, err := logFids(dir, ext)
	if err != nil {
		return nil, err
	}
	for _, fid := range fids {
		t.fid = max(t.fid, fid)
	}
	if t.fid > 0 {
		if t.f, err = openLog(t.path(t.fid)); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// openLogTails finds the newest of Badger's WAL files and of its value-log
// files in dir.
func openLogTails(dir string) (wal, vlog *logTail, err error) {
	if wal, err = openLogTail(dir, ".mem", 5); err != nil {
		return nil, nil, err
	}
	if vlog, err = openLogTail(dir, ".vlog", 6); err != nil {
		wal.close()
		return nil, nil, err
	}
	return wal, vlog, nil
}

// sync makes durable what was written to the newest file and to every file
// before it since the last sync.
func (t *logTail) sync() error {
	rotated := false
	for {
		next, err := openLog(t.path(t.fid + 1))
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return err
		}
		if t.f != nil {
			err := persistence.Fdatasync(t.f)
			t.f.Close()
			if err != nil {
				next.Close()
				return err
			}
		}
		t.f, t.fid, rotated = next, t.fid+1, true
	}
	if rotated {
		if err := persistence.SyncDir(t.dir); err != nil {
			return err
		}
	}
	if t.f == nil {
		return nil
	}
	return persistence.Fdatasync(t.f)
}

func (t *logTail) close() {
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
}

// syncAll makes durable every log file of t's kind in its directory: after
// value-log GC, whose rewrites may have gone into several memtables.
func (t *logTail) syncAll() error {
	fids, err := logFids(t.dir, t.ext)
	if err != nil {
		return err
	}
	for _, fid := range fids {
		err := persistence.SyncPath(t.path(fid), os.O_RDWR)
		if err != nil && !errors.Is(err, fs.ErrNotExist) { // gone: a WAL flushed into a table meanwhile
			return err
		}
	}
	return t.sync()
}

// openLog opens a log file to sync it (Windows wants write access for that).
func openLog(path string) (*os.File, error) { return os.OpenFile(path, os.O_RDWR, 0) }
