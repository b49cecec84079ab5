//go:build !linux

package persistence

import (
	"errors"
	"os"
)

// Fdatasync is an fsync where there is no fdatasync.
func Fdatasync(f *os.File) error { return f.Sync() }

// punchHole is errors.ErrUnsupported where there is no fallocate: the
// caller writes zeros.
func punchHole(*os.File, int64, int64) error { return errors.ErrUnsupported }
