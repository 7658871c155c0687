package stage

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pipemare/pipemare/transport"
)

// TestOwnedDataGoBackToThePools: the data of a message marked Own (over
// shared memory, the transport's copies) are the stage's: a shared one is
// not copied, and each goes back to the pools once nothing reads it, as
// does one no input reads. The driver's data in one process (not Own) are
// only read: never pooled, a shared one copied.
func TestOwnedDataGoBackToThePools(t *testing.T) {
	r := &Runtime{inputs: []input{{data: 0}, {data: 1, shared: true}, {data: -1, key: 7}}}
	get := func(n int) *tensor.Dense { return recycle.Get(tensor.Float32, tensor.Shape{n}) }
	x, y, unread := get(3), get(4), get(5)
	acts := map[int64]gorgonia.Value{7: get(6)}
	in, err := r.inputValues(acts, received(transport.Message{Values: []gorgonia.Value{x, y, unread}, Own: true}), 0)
	require.NoError(t, err)
	require.Same(t, x, in.vals[0])
	require.Same(t, y, in.vals[1], "an owned shared data input is not copied")
	require.Same(t, unread, get(5), "owned data no input reads go back to the pools at once")
	in.release()
	require.Same(t, x, get(3), "owned data go back to the pools once read")
	require.Same(t, y, get(4))

	acts[7] = get(6)
	in, err = r.inputValues(acts, received(transport.Message{Values: []gorgonia.Value{x, y, unread}}), 0)
	require.NoError(t, err)
	require.Same(t, x, in.vals[0])
	require.NotSame(t, y, in.vals[1], "a shared data input the stage does not own is copied")
	in.release()
	require.NotSame(t, x, get(3), "data the stage does not own never go to the pools")
	require.NotSame(t, unread, get(5))
}
