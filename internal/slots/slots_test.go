package slots

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

type vg struct{ v gorgonia.Value }

func (x vg) Value() gorgonia.Value         { return x.v }
func (x vg) Grad() (gorgonia.Value, error) { return nil, nil }

func TestBindSaveLoad(t *testing.T) {
	model := []gorgonia.ValueGrad{vg{tensor.New(tensor.WithShape(2, 3), tensor.Of(tensor.Float32))}, vg{gorgonia.NewF64(1)}}
	s := New("mean", "variance")
	saved := map[string]tensor.Tensor{}
	require.NoError(t, s.Save(saved))
	require.Empty(t, saved, "an unbound Set saves nothing")
	require.NoError(t, s.Bind(model))
	require.Equal(t, int64(2*(6*4+8)), s.Bytes())
	require.Equal(t, tensor.ScalarShape(), s.Slot(1, 1).Shape(), "a scalar's slot is 0-d")
	s.Slot(0, 0).Float32s()[4] = 7
	s.Slot(1, 1).Float64s()[0] = 0.5
	require.NoError(t, s.Save(saved))
	require.Len(t, saved, 4)

	fresh := New("mean", "variance")
	n, err := fresh.Load(saved, true)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.True(t, fresh.Bound(), "a State binds an unbound Set")
	require.Equal(t, float32(7), fresh.Slot(0, 0).Float32s()[4])
	require.Equal(t, 0.5, fresh.Slot(1, 1).Data())
	require.NoError(t, fresh.Bind(model), "the same model binds again")
	require.ErrorContains(t, fresh.Bind(model[:1]), "bound to 2 learnables, now given 1")

	saved["mean/0"].(*tensor.Dense).Float32s()[4] = 9
	require.Equal(t, float32(7), fresh.Slot(0, 0).Float32s()[4], "Load copies")

	for _, c := range []struct {
		edit func(map[string]tensor.Tensor)
		want string
	}{
		{func(m map[string]tensor.Tensor) { delete(m, "variance/0") }, `missing tensor "variance/0"`},
		{func(m map[string]tensor.Tensor) { delete(m, "variance/1") }, `missing tensor "variance/1"`},
		{func(m map[string]tensor.Tensor) { delete(m, "mean/1"); delete(m, "variance/1") }, "the state has slots for 1 learnables, the solver has 2"},
		{func(m map[string]tensor.Tensor) { m["mean/2"] = m["mean/0"] }, `missing tensor "variance/2"`},
		{func(m map[string]tensor.Tensor) { m["velocity/0"] = m["mean/0"] }, `unexpected tensor "velocity/0" (this solver keeps "mean/<i>" and "variance/<i>")`},
		{func(m map[string]tensor.Tensor) { m["mean"] = m["mean/0"] }, `unexpected tensor "mean"`},
		{func(m map[string]tensor.Tensor) { m["mean/x"] = m["mean/0"] }, `unexpected tensor "mean/x"`},
		{func(m map[string]tensor.Tensor) { m["mean/0"] = nil }, "mean/0 is nil"},
		{func(m map[string]tensor.Tensor) { m["mean/1"] = m["mean/0"] }, "mean/1 is (2, 3) float32; learnable 1 is () float64"},
	} {
		bad := map[string]tensor.Tensor{}
		for k, v := range saved {
			bad[k] = v
		}
		c.edit(bad)
		_, err := fresh.Load(bad, true)
		require.ErrorContains(t, err, c.want)
		require.Equal(t, float32(7), fresh.Slot(0, 0).Float32s()[4], "a failed Load changes nothing")
	}
	n, err = fresh.Load(nil, false)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Zero(t, fresh.Slot(0, 0).Float32s()[4], "an empty State zeroes a bound Set")

	byState := New("mean", "variance")
	_, err = byState.Load(saved, true)
	require.NoError(t, err)
	_, err = byState.Load(nil, false)
	require.NoError(t, err)
	require.False(t, byState.Bound(), "what an unbound Set saved gives it back unbound")

	// A solver that stepped a model of no learnables (a pipeline stage that
	// owns none) saves no slot; its state loads, and binds a fresh Set to
	// no learnables, but a Set bound to learnables refuses it.
	none := New("mean", "variance")
	require.NoError(t, none.Bind(nil))
	empty := map[string]tensor.Tensor{}
	require.NoError(t, none.Save(empty))
	require.Empty(t, empty)
	n, err = none.Load(empty, true)
	require.NoError(t, err)
	require.Zero(t, n)
	fromNone := New("mean", "variance")
	_, err = fromNone.Load(empty, true)
	require.NoError(t, err)
	require.True(t, fromNone.Bound())
	require.ErrorContains(t, fromNone.Bind(model), "bound to 0 learnables, now given 2")
	_, err = fresh.Check(empty, true)
	require.ErrorContains(t, err, "the state holds no slot (a solver that stepped no learnables), the solver has 2 learnables")
	_, err = fresh.Load(empty, true)
	require.ErrorContains(t, err, "the solver has 2 learnables")
	require.True(t, fresh.Bound(), "a refused Load changes nothing")

	require.ErrorContains(t, New("v").Bind([]gorgonia.ValueGrad{vg{tensor.New(tensor.WithShape(2), tensor.Of(tensor.Int))}}), "learnable 0 is int")
	require.ErrorContains(t, New("v").Bind([]gorgonia.ValueGrad{vg{nil}}), "learnable 0 has no value")
}
