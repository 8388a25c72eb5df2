// Package atomicfile writes files so that a crash, a killed process or a full disk never
// leaves a partial file in their place.
//
// Write writes to a temporary file in the destination's folder, syncs it, renames it over the
// destination and syncs the folder: the destination holds either its old contents or the
// new ones, never a mixture. A process killed in the middle leaves its temporary file behind,
// named ".NAME.tmp-DIGITS"; the next successful Write to the same destination removes such
// leftovers.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Write creates or replaces the file at path with what write writes. A new file gets mode
// perm less the process's umask, as a file os.OpenFile creates does; a file it replaces keeps
// its permission bits (a model its owner made private stays private). On any error it removes
// its temporary file, leaves a file already at path untouched and returns the error, naming
// path.
func Write(path string, perm os.FileMode, write func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	start := time.Now()
	old, statErr := os.Stat(path)
	replacing := statErr == nil && old.Mode().IsRegular()
	tmp, err := createTemp(dir, tempPrefix(base), perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}()
	if err = write(tmp); err != nil {
		return err
	}
	if replacing {
		if err = tmp.Chmod(old.Mode().Perm()); err != nil && runtime.GOOS != "windows" {
			return err
		}
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if err = syncDir(dir); err != nil {
		return err
	}
	removeLeftovers(dir, base, start)
	return nil
}

// createTemp creates a new file in dir named prefix and decimal digits, with mode perm less the
// umask (os.CreateTemp's files are 0600 whatever the umask), open for writing.
func createTemp(dir, prefix string, perm os.FileMode) (*os.File, error) {
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) && try < 1000 {
			continue
		}
		return f, err
	}
}

// tempPrefix is what the temporary files for a destination named base begin with.
func tempPrefix(base string) string { return "." + base + ".tmp-" }

// removeLeftovers removes the temporary files of earlier writes to dir/base that never
// finished (their process was killed): those not modified since this write began, so that a
// write still in progress in another process is left alone. Failures are ignored: the
// leftovers only take space.
func removeLeftovers(dir, base string, start time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := tempPrefix(base)
	for _, e := range entries {
		name := e.Name()
		digits, ok := strings.CutPrefix(name, prefix)
		if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(start) {
			os.Remove(filepath.Join(dir, name))
		}
	}
}

// syncDir flushes a change to a folder's entries (a rename) to disk.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // folders cannot be synced there; a rename is durable enough
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
