package checkpoint

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/internal/faultpoint"
)

// TestFaultPoints: a checkpoint reaches the test hook's points in order —
// each shard once it is durable, then before the manifest, then before
// LATEST — and at each what a crash there would leave is on disk: the
// shard, no manifest; a manifest, LATEST on the previous checkpoint.
func TestFaultPoints(t *testing.T) {
	root := t.TempDir()
	save(t, root, 5)
	var got []faultpoint.Point
	faultpoint.Set(func(p faultpoint.Point) {
		got = append(got, p)
		dir := filepath.Join(root, stepName(p.Step))
		_, manifest := os.Stat(filepath.Join(dir, manifestName))
		latest, err := readLatest(root)
		require.NoError(t, err)
		switch p.Name {
		case faultpoint.ShardWritten:
			_, err := os.Stat(filepath.Join(dir, shardName(p.Stage)))
			require.NoError(t, err, "the shard is there")
			require.True(t, os.IsNotExist(manifest))
		case faultpoint.BeforeManifest:
			require.True(t, os.IsNotExist(manifest))
		case faultpoint.BeforeLatest:
			require.NoError(t, manifest)
		}
		require.Equal(t, stepName(5), latest, "LATEST moves last")
	})
	defer faultpoint.Set(nil)
	save(t, root, 10)
	require.Equal(t, []faultpoint.Point{
		{Name: faultpoint.ShardWritten, Step: 10, Stage: 0},
		{Name: faultpoint.ShardWritten, Step: 10, Stage: 1},
		{Name: faultpoint.ShardWritten, Step: 10, Stage: 2},
		{Name: faultpoint.BeforeManifest, Step: 10, Stage: -1},
		{Name: faultpoint.BeforeLatest, Step: 10, Stage: -1},
	}, got)
}
