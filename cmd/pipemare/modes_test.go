package main

import (
	"context"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/rundir"
)

// TestOutputsHaveOneMode: every file a run writes — the report, the
// trace, the plots, settings.json, the model and the checkpoints — is
// created with checkpoint.FileMode less the umask: 0644 under umask 022,
// 0640 under 027.
func TestOutputsHaveOneMode(t *testing.T) {
	for _, c := range []struct {
		umask int
		want  fs.FileMode
	}{{0o022, 0o644}, {0o027, 0o640}} {
		old := syscall.Umask(c.umask)
		dir := t.TempDir()
		code, _, stderr := runCLI(context.Background(), "train", "-model", "mlp", "-epochs", "2", "-limit", "320", "-checkpoint-every", "5", "-out", dir)
		syscall.Umask(old)
		require.Equal(t, 0, code, stderr)
		require.Equal(t, c.want, checkpoint.FileMode&^fs.FileMode(c.umask))
		seen := map[string]bool{}
		require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			info, err := d.Info()
			require.NoError(t, err)
			require.Equal(t, c.want, info.Mode().Perm(), "%s under umask %03o", path, c.umask)
			seen[filepath.Base(path)] = true
			return nil
		}))
		for _, name := range []string{"report.json", "trace.json", rundir.SettingsFile, rundir.ModelFile, "LATEST", "MANIFEST.json", "stage-000.safetensors"} {
			require.True(t, seen[name], "%s written", name)
		}
	}
}
