//go:build !linux

package badgerdb

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
