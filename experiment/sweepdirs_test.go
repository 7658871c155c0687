package experiment

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSweepDefaultDirs: without a cache or a work directory, the runs go
// into Out/runs and the checkpoints of those under way into
// Out/checkpoints.
func TestSweepDefaultDirs(t *testing.T) {
	dir := t.TempDir()
	s := fakeSweep(t, &fakeTrainer{}, dir, "sequential")
	s.Cache, s.Work = Cache{}, ""
	_, err := s.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, filepath.Join(s.Out, "runs"), s.Cache.Dir)
	require.Equal(t, filepath.Join(s.Out, "checkpoints"), s.Work)
	require.FileExists(t, filepath.Join(s.Out, "runs", "sequential-N4-e1-seed1.json"))
}
