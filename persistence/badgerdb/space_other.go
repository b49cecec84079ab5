//go:build !linux

package badgerdb

import "errors"

// freeBytes is not measured here: the store does not refuse writes for
// lack of space (the write's own error says it).
func freeBytes(string) (int64, error) { return 0, errors.ErrUnsupported }
