package persistence

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

// Lock holds a file or directory against other holders until it is
// closed; without create a missing path is fs.ErrNotExist.
func TestLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "x.lock")
	if _, err := Lock(file, false); errors.Is(err, errors.ErrUnsupported) {
		t.Skip("no flock here")
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Lock(missing, false) = %v, want fs.ErrNotExist", err)
	}
	for _, c := range []struct {
		path   string
		create bool
	}{{file, true}, {dir, false}} {
		first, err := Lock(c.path, c.create)
		if err != nil {
			t.Fatalf("Lock(%s, %v): %v", c.path, c.create, err)
		}
		// flock locks an open file description: a second open of the
		// path in this process is refused as another process's would be.
		if _, err := Lock(c.path, c.create); !errors.Is(err, ErrLocked) {
			t.Errorf("Lock(%s) while held = %v, want ErrLocked", c.path, err)
		}
		first.Close()
		again, err := Lock(c.path, c.create)
		if err != nil {
			t.Errorf("Lock(%s) after Close: %v", c.path, err)
		} else {
			again.Close()
		}
	}
}
