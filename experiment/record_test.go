package experiment

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/runspec"
)

// TestCacheRefusesARecordOfFlags: a record written before records carried
// their spec (its run as pipemare train flags) is not taken for the run
// now: it is refused, naming the file, what differs and what to do.
func TestCacheRefusesARecordOfFlags(t *testing.T) {
	c := Cache{Dir: t.TempDir()}
	path := filepath.Join(c.Dir, "naive-N4-e1-seed1.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"method":"naive","setting":"N=4","epochs":1,"seed":1,"args":["-model","mlp","-epochs","1"],"steps":5}`), 0o644))
	seed := int64(1)
	now := Record{Spec: runspec.Spec{Model: "mlp", Epochs: 1, Seed: &seed}}
	_, err := c.Load("naive-N4-e1-seed1", now)
	require.ErrorContains(t, err, "run cache: "+path+" is another run: model \"\" there, mlp here; epochs 0 there, 1 here; seed default there, 1 here; give another cache directory, or delete it")

	require.NoError(t, c.Save("naive-N4-e1-seed1", &now))
	r, err := c.Load("naive-N4-e1-seed1", now)
	require.NoError(t, err)
	require.Equal(t, now.Spec, r.Spec, "a record of the spec is the run's")
}
