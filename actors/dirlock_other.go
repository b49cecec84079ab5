//go:build !unix

package actors

import "os"

// lockDir opens path without a lock where flock does not exist.
func lockDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}
