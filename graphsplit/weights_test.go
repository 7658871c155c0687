package graphsplit

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestWeightsSHA256 hashes the learnables in plan order as raw
// little-endian bytes: the same weights give the same hash, flipping one
// bit of one weight changes it, and putting the bit back restores it.
func TestWeightsSHA256(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		m, err := testmodels.MLP(dt, 4, 1)
		require.NoError(t, err)
		plan, err := Split(m.Graph, m.Cost, m.Learnables, Stages(2))
		require.NoError(t, err)
		defer plan.Close()

		// The format: every learnable's elements, little-endian, in order.
		want := sha256.New()
		for _, n := range plan.Learnables {
			require.NoError(t, binary.Write(want, binary.LittleEndian, n.Value().Data()))
		}
		sum, err := plan.WeightsSHA256()
		require.NoError(t, err)
		require.Equal(t, hex.EncodeToString(want.Sum(nil)), sum, dt)
		again, err := plan.WeightsSHA256()
		require.NoError(t, err)
		require.Equal(t, sum, again, "%v: stable", dt)

		last := plan.Learnables[len(plan.Learnables)-1].Value()
		flip := func() {
			switch d := last.Data().(type) {
			case []float64:
				d[len(d)-1] = math.Float64frombits(math.Float64bits(d[len(d)-1]) ^ 1)
			case []float32:
				d[len(d)-1] = math.Float32frombits(math.Float32bits(d[len(d)-1]) ^ 1)
			}
		}
		flip()
		flipped, err := plan.WeightsSHA256()
		require.NoError(t, err)
		require.NotEqual(t, sum, flipped, "%v: one bit of one weight", dt)
		flip()
		back, err := plan.WeightsSHA256()
		require.NoError(t, err)
		require.Equal(t, sum, back, dt)
	}
}

// TestWeightsSHA256RefusesOtherDtypes: an int learnable is named.
func TestWeightsSHA256RefusesOtherDtypes(t *testing.T) {
	g := G.NewGraph()
	n := G.NewVector(g, tensor.Int, G.WithShape(2), G.WithName("counts"), G.WithValue(tensor.New(tensor.WithBacking([]int{1, 2}))))
	_, err := (&Plan{Learnables: G.Nodes{n}}).WeightsSHA256()
	require.ErrorContains(t, err, "learnable 0 (counts)")
}
