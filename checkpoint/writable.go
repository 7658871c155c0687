package checkpoint

import "os"

// CheckWritable checks, before a long run, that the file path can be
// created or replaced with FileMode: it leaves an existing file as it is
// and removes the empty one it created to check. A command calls it for
// every output it was asked to write, so that a bad path fails before the
// work, not after.
func CheckWritable(path string) error {
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, FileMode)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if statErr != nil {
		return os.Remove(path)
	}
	return nil
}
