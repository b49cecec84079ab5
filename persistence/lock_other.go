//go:build !unix

package persistence

import (
	"errors"
	"fmt"
	"os"
)

// Lock is errors.ErrUnsupported where there is no flock.
func Lock(path string, create bool) (*os.File, error) {
	return nil, fmt.Errorf("lock %s: %w", path, errors.ErrUnsupported)
}
