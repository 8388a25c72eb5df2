//go:build linux || darwin || freebsd

package disk

import "golang.org/x/sys/unix"

func free(path string) (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
