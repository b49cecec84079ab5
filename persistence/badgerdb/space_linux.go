package badgerdb

import "syscall"

// freeBytes returns the bytes of dir's file system that an unprivileged
// user may still write (statfs's f_bavail): what a root process may use
// beyond it is kept for the system.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
