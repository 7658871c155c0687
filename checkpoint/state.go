package checkpoint

import (
	"strconv"
	"strings"

	"github.com/pipemare/pipemare/solvers"
	"github.com/pkg/errors"
	"gorgonia.org/tensor"
)

// PutStates adds the states of a stage's solver chain (solvers.Save) to
// the shard under prefix: layer i's tensors, ints and floats as
// "<prefix>/<i>/<name>", its kind as the string "<prefix>/<i>", and the
// number of layers as the int "<prefix>".
func (s *Shard) PutStates(prefix string, states []solvers.State) {
	s.init()
	s.Ints[prefix] = int64(len(states))
	for i, st := range states {
		p := prefix + "/" + strconv.Itoa(i)
		s.Strings[p] = st.Kind
		for k, v := range st.Tensors {
			s.Tensors[p+"/"+k] = v
		}
		for k, v := range st.Ints {
			s.Ints[p+"/"+k] = v
		}
		for k, v := range st.Floats {
			s.Floats[p+"/"+k] = v
		}
	}
}

// States returns the states PutStates put under prefix, for solvers.Load.
func (s Shard) States(prefix string) ([]solvers.State, error) {
	n, ok := s.Ints[prefix]
	if !ok {
		return nil, errors.Errorf("checkpoint: the shard holds no solver states under %q", prefix)
	}
	out := make([]solvers.State, n)
	for i := range out {
		p := prefix + "/" + strconv.Itoa(i)
		kind, ok := s.Strings[p]
		if !ok {
			return nil, errors.Errorf("checkpoint: the shard holds %d solver states under %q but not the kind of layer %d", n, prefix, i)
		}
		out[i] = solvers.State{Kind: kind, Tensors: under(s.Tensors, p), Ints: under(s.Ints, p), Floats: under(s.Floats, p)}
	}
	return out, nil
}

func (s *Shard) init() {
	if s.Tensors == nil {
		s.Tensors = map[string]tensor.Tensor{}
	}
	if s.Ints == nil {
		s.Ints = map[string]int64{}
	}
	if s.Floats == nil {
		s.Floats = map[string]float64{}
	}
	if s.Strings == nil {
		s.Strings = map[string]string{}
	}
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
