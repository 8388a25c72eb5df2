// Package disk tells how much room a file system has left, so that a long run can be warned
// before its checkpoints have nowhere to go.
package disk

import "fmt"

// Free returns the number of bytes that the calling user can still write on the file system
// holding path (a file or a folder), and whether the system said: ok is false where it cannot
// tell (js/wasm, some systems) or path cannot be reached.
func Free(path string) (bytes int64, ok bool) { return free(path) }

// Size writes a number of bytes for people: "5.3 GB", "120.4 MB", "12 KB".
func Size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KB", (n+1023)>>10)
}
