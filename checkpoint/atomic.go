package checkpoint

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pkg/errors"
)

// tmpMark is in the name of every temporary file: "." + name + tmpMark +
// random. Readers never open such a file; Commit removes the ones left by
// a crash.
const tmpMark = ".tmp-"

// FileMode is the permission every file the library writes is created
// with — checkpoints, the trained model, settings, reports, traces,
// plots, predictions — less the process's umask (0644 under the usual
// umask 022), as os.Create would with 0666: none of them is a secret.
const FileMode os.FileMode = 0o644

// createTemp creates a new file in dir named prefix and a random suffix,
// with FileMode (os.CreateTemp's would be 0600), opened for writing.
func createTemp(dir, prefix string) (*os.File, error) {
	for try := 0; ; try++ {
		path := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, FileMode)
		if os.IsExist(err) && try < 100 {
			continue
		}
		return f, err
	}
}

// writeAtomic writes name in dir through write so that name holds either
// its old content (or nothing) or all of the new one, whenever the
// process or the machine stops: the bytes go to a temporary file in dir,
// which is fsynced, renamed to name, and dir is fsynced. It returns the
// size and SHA-256 of what it wrote.
func writeAtomic(dir, name string, write func(io.Writer) error) (int64, string, error) {
	f, err := createTemp(dir, "."+name+tmpMark)
	if err != nil {
		return 0, "", errors.Wrapf(err, "checkpoint: creating a temporary file for %s", filepath.Join(dir, name))
	}
	tmp := f.Name()
	fail := func(err error, what string) (int64, string, error) {
		f.Close()
		os.Remove(tmp)
		return 0, "", errors.Wrapf(err, "checkpoint: %s %s", what, filepath.Join(dir, name))
	}
	h := sha256.New()
	cw := &countingWriter{w: io.MultiWriter(f, h)}
	bw := bufio.NewWriterSize(cw, 1<<20)
	if err := write(bw); err != nil {
		return fail(err, "writing")
	}
	if err := bw.Flush(); err != nil {
		return fail(err, "writing")
	}
	if err := f.Sync(); err != nil {
		return fail(err, "syncing")
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return 0, "", errors.Wrapf(err, "checkpoint: closing %s", tmp)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return 0, "", errors.Wrapf(err, "checkpoint: renaming %s", tmp)
	}
	if err := syncDir(dir); err != nil {
		return 0, "", err
	}
	return cw.n, hex.EncodeToString(h.Sum(nil)), nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// syncDir fsyncs a directory, making the names created, renamed or
// removed in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return errors.Wrapf(err, "checkpoint: opening directory %s to sync it", dir)
	}
	defer d.Close()
	return errors.Wrapf(d.Sync(), "checkpoint: syncing directory %s", dir)
}

// syncFile fsyncs a file that another process may have written.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return errors.Wrap(err, "checkpoint")
	}
	defer f.Close()
	return errors.Wrapf(f.Sync(), "checkpoint: syncing %s", path)
}

// isTemp reports whether name is a temporary file of writeAtomic.
func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tmpMark)
}

// removeTemps removes the temporary files a crash left in dir.
func removeTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return errors.Wrap(err, "checkpoint")
	}
	removed := false
	for _, e := range entries {
		if isTemp(e.Name()) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !os.IsNotExist(err) {
				return errors.Wrap(err, "checkpoint: removing a temporary file")
			}
			removed = true
		}
	}
	if removed {
		return syncDir(dir)
	}
	return nil
}

// WriteFile writes data to path as the checkpoint writes its own files:
// to a temporary name in path's directory, fsynced, renamed to path, the
// directory fsynced. After a crash at any instant path holds its old
// content (or nothing) or all of data, never a part.
func WriteFile(path string, data []byte) error {
	_, _, err := writeAtomic(filepath.Dir(path), filepath.Base(path), func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	return err
}
