package badgerdb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/persistence"
)

// repairBeforeOpen puts right, before Badger opens dir, what a process
// killed at the wrong moment leaves that Badger cannot take up by itself:
// empty logs (removeEmptyLogs) and value-log files a delete's GC rewrote
// but had not yet deleted (discardAllValueLogs). It runs only while it
// holds Badger's directory lock, so that it never touches the files of a
// store another process has open; held elsewhere, it does nothing and
// Badger's open reports the lock.
func repairBeforeOpen(dir string, log zerolog.Logger) error {
	lock, err := persistence.Lock(dir, false) // the lock Badger takes: flock on the directory
	switch {
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, persistence.ErrLocked) || errors.Is(err, errors.ErrUnsupported):
		// No store yet, one another process has open, or no way to
		// tell: the files are left as they are.
		return nil
	case err != nil:
		return err
	}
	defer lock.Close()
	if err := removeEmptyLogs(dir, log); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, purgeGCFile)); err == nil {
		return discardAllValueLogs(dir, log)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// removeEmptyLogs deletes the zero-length memtable logs (.mem) and
// value-log files (.vlog) in dir. Badger creates such a file and then
// sizes it; a process killed between the two leaves it empty, and Badger
// then refuses to open the directory ("while opening memtables: ...
// Create a new file", upstream badger#2207). An empty file holds no entry
// and no value pointer names it, so nothing is lost.
func removeEmptyLogs(dir string, log zerolog.Logger) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	removed := 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !(strings.HasSuffix(name, ".mem") || strings.HasSuffix(name, ".vlog")) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if info.Size() != 0 {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("remove the empty log %s a crash left: %w", name, err)
		}
		log.Warn().Str("file", name).Msg("removed an empty Badger log a crash left (created, not yet sized)")
		removed++
	}
	if removed > 0 {
		return persistence.SyncDir(dir)
	}
	return nil
}

// purgeGCFile, in a Badger store's directory, says a delete's value-log GC
// is under way (valueLogGCAll). Badger's GC resets a file's discard count
// when it has rewritten the file and deletes the file only once no
// iterator is open on it, which the GC holds until what it rewrote is
// synced: a crash between the two leaves the old file, with the deleted
// values in it, and no discard count that would ever point a GC at it.
const purgeGCFile = "PURGE_GC"

// markPurgeGC creates purgeGCFile, durably.
func markPurgeGC(dir string) error {
	path := filepath.Join(dir, purgeGCFile)
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		return err
	}
	if err := persistence.SyncPath(path, os.O_RDONLY); err != nil {
		return err
	}
	return persistence.SyncDir(dir)
}

// unmarkPurgeGC removes purgeGCFile, durably.
func unmarkPurgeGC(dir string) error {
	if err := os.Remove(filepath.Join(dir, purgeGCFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return persistence.SyncDir(dir)
}

// discardAllValueLogs gives every value-log file in dir a discard count
// of its size in Badger's discard statistics (the DISCARD file: 16-byte
// slots of big-endian file id and count, in use up to the first id 0,
// sorted by Badger when it opens), so that the GC the open runs next
// (finishPurges) rewrites each of them: the live values move, and a file
// left by a crash in the middle of a delete's GC goes with what it held.
// It costs one rewrite of the value log, once, after such a crash.
func discardAllValueLogs(dir string, log zerolog.Logger) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	sizes := map[uint64]uint64{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".vlog")
		if !ok {
			continue
		}
		fid, err := strconv.ParseUint(name, 10, 32)
		if err != nil || fid == 0 {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		sizes[fid] = max(uint64(info.Size()), 1)
	}
	files := len(sizes)
	const slot, fileSize = 16, 1 << 20
	path := filepath.Join(dir, "DISCARD")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if info.Size() == 0 {
		if err := f.Truncate(fileSize); err != nil {
			return err
		}
	} else if info.Size()%slot != 0 {
		return fmt.Errorf("%w: %s is %d bytes, not whole slots", persistence.ErrCorrupt, path, info.Size())
	}
	size := max(info.Size(), fileSize)
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil {
		return err
	}
	used := 0
	for used < len(b)/slot && binary.BigEndian.Uint64(b[used*slot:]) != 0 {
		fid := binary.BigEndian.Uint64(b[used*slot:])
		if n, ok := sizes[fid]; ok {
			binary.BigEndian.PutUint64(b[used*slot+8:], max(n, binary.BigEndian.Uint64(b[used*slot+8:])))
			delete(sizes, fid)
		}
		used++
	}
	for fid, n := range sizes {
		if used+1 >= len(b)/slot {
			return fmt.Errorf("%s is full: %d value-log files", path, used)
		}
		binary.BigEndian.PutUint64(b[used*slot:], fid)
		binary.BigEndian.PutUint64(b[used*slot+8:], n)
		used++
		clear(b[used*slot : used*slot+slot]) // Badger's end of the slots
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	log.Warn().Int("files", files).Msg("a delete's value-log GC was cut short: every value-log file is rewritten")
	return nil
}
