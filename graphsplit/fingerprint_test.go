package graphsplit

import (
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestFingerprint: the same model built twice and split the same way has
// the same fingerprint; another cut, another model or another microbatch
// size differs, and the parts say which stage.
func TestFingerprint(t *testing.T) {
	split := func(build testmodels.Builder, batch int, opts ...Option) *Plan {
		m, err := build(tensor.Float32, batch, 1)
		require.NoError(t, err)
		p, err := Split(m.Graph, m.Cost, m.Learnables, opts...)
		require.NoError(t, err)
		return p
	}
	a := split(testmodels.CNN, 4, FineGrained())
	b := split(testmodels.CNN, 4, FineGrained())
	require.Equal(t, a.Fingerprint(), b.Fingerprint())
	require.Len(t, a.Fingerprint(), 64)
	require.Len(t, a.FingerprintParts(), len(a.Stages)+1)

	other := split(testmodels.CNN, 4, FineGrained(), Stages(2))
	require.NotEqual(t, a.Fingerprint(), other.Fingerprint(), "another cut")
	require.NotEqual(t, a.Fingerprint(), split(testmodels.CNN, 2, FineGrained()).Fingerprint(), "another microbatch size")
	require.NotEqual(t, a.Fingerprint(), split(testmodels.ResNet, 4, FineGrained()).Fingerprint(), "another model")

	c := split(testmodels.CNN, 4, FineGrained())
	c.Stages[2].Learnables[0].Value().Data().([]float32)[0] += 1
	require.Equal(t, a.Fingerprint(), c.Fingerprint(), "weights' values are not part of the cut")
}
