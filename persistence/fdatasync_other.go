//go:build !linux

package persistence

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
