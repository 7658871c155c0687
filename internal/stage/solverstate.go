package stage

import (
	"strconv"
	"strings"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/solvers"
	"github.com/pkg/errors"
)

// The solver's state in a shard: a checkpoint stores tensors and numbers
// by name and knows no solver; the stage lays out its solver chain's
// states (solvers.Save) in them.

// putSolverStates adds states to sh (whose maps are made) under prefix:
// layer i's tensors, ints and floats as "<prefix>/<i>/<name>", its kind as
// the string "<prefix>/<i>", and the number of layers as the int
// "<prefix>".
func putSolverStates(sh *checkpoint.Shard, prefix string, states []solvers.State) {
	sh.Ints[prefix] = int64(len(states))
	for i, st := range states {
		p := prefix + "/" + strconv.Itoa(i)
		sh.Strings[p] = st.Kind
		for k, v := range st.Tensors {
			sh.Tensors[p+"/"+k] = v
		}
		for k, v := range st.Ints {
			sh.Ints[p+"/"+k] = v
		}
		for k, v := range st.Floats {
			sh.Floats[p+"/"+k] = v
		}
	}
}

// solverStates returns the states putSolverStates put under prefix, for
// solvers.Load.
func solverStates(sh checkpoint.Shard, prefix string) ([]solvers.State, error) {
	n, ok := sh.Ints[prefix]
	if !ok {
		return nil, errors.Errorf("the shard holds no solver states under %q", prefix)
	}
	out := make([]solvers.State, n)
	for i := range out {
		p := prefix + "/" + strconv.Itoa(i)
		kind, ok := sh.Strings[p]
		if !ok {
			return nil, errors.Errorf("the shard holds %d solver states under %q but not the kind of layer %d", n, prefix, i)
		}
		out[i] = solvers.State{Kind: kind, Tensors: under(sh.Tensors, p), Ints: under(sh.Ints, p), Floats: under(sh.Floats, p)}
	}
	return out, nil
}

// under returns the entries of m named "<prefix>/<name>", by name.
func under[V any](m map[string]V, prefix string) map[string]V {
	out := map[string]V{}
	for k, v := range m {
		if name, ok := strings.CutPrefix(k, prefix+"/"); ok {
			out[name] = v
		}
	}
	return out
}
