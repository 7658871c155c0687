package checkpoint

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ModelExt is the extension of a trained model file: it is a safetensors
// file (readable by any safetensors reader) of the learnables by name.
const ModelExt = ".safetensors"

// bnPrefix names the BatchNorm statistics in a model file:
// "batchnorm/<k>/mean" and "batchnorm/<k>/variance" for the k-th
// BatchNorm op of the graph.
const bnPrefix = "batchnorm/"

// SaveModel writes the current values of learnables (the user's, after
// training) to path atomically: name, shape, dtype and data of each, in a
// safetensors file that also carries the SHA-256 of its tensors, and the
// running statistics of every BatchNorm op of their graph, in the graph's
// order (evaluation reads them: without them a model with BatchNorm does
// not give its accuracy back). Names must be unique, not empty and not
// begin with "batchnorm/"; values float32, float64, int64 or int32
// tensors or float scalars.
func SaveModel(path string, learnables gorgonia.Nodes) error {
	s := Shard{Tensors: make(map[string]tensor.Tensor, len(learnables))}
	for i, bn := range batchNorms(learnables) {
		mean, variance := bn.Stats()
		if mean == nil || variance == nil {
			return errors.Errorf("checkpoint: BatchNorm op %d has no running statistics", i)
		}
		s.Tensors[bnKey(i, "mean")], s.Tensors[bnKey(i, "variance")] = mean, variance
	}
	for i, n := range learnables {
		name := n.Name()
		if name == "" {
			return errors.Errorf("checkpoint: learnable %d has no name; name it (gorgonia.WithName) to save it", i)
		}
		if strings.HasPrefix(name, bnPrefix) {
			return errors.Errorf("checkpoint: learnable %q: names beginning with %q are the BatchNorm statistics'", name, bnPrefix)
		}
		if _, dup := s.Tensors[name]; dup {
			return errors.Errorf("checkpoint: two learnables are named %q", name)
		}
		t, err := valueTensor(n)
		if err != nil {
			return err
		}
		s.Tensors[name] = t
	}
	_, err := writeTensors(filepath.Dir(path), filepath.Base(path), modelFormat, 0, s)
	return err
}

func bnKey(i int, what string) string { return bnPrefix + strconv.Itoa(i) + "/" + what }

// batchNorms are the BatchNorm ops of the learnables' graph, in its order.
func batchNorms(learnables gorgonia.Nodes) []*gorgonia.BatchNormOp {
	if len(learnables) == 0 || learnables[0].Graph() == nil {
		return nil
	}
	var out []*gorgonia.BatchNormOp
	seen := map[*gorgonia.BatchNormOp]bool{}
	for _, n := range learnables[0].Graph().AllNodes() {
		if op, ok := n.Op().(*gorgonia.BatchNormOp); ok && !seen[op] {
			seen[op] = true
			out = append(out, op)
		}
	}
	return out
}

// valueTensor is a learnable's value as a tensor (a scalar as a 0-d one).
func valueTensor(n *gorgonia.Node) (tensor.Tensor, error) {
	switch v := n.Value().(type) {
	case nil:
		return nil, errors.Errorf("checkpoint: learnable %q has no value", n.Name())
	case tensor.Tensor:
		return v, nil
	case *gorgonia.F32:
		return tensor.New(tensor.FromScalar(float32(*v))), nil
	case *gorgonia.F64:
		return tensor.New(tensor.FromScalar(float64(*v))), nil
	default:
		return nil, errors.Errorf("checkpoint: learnable %q holds %T", n.Name(), v)
	}
}

// LoadModel loads the model file path (SaveModel) into learnables, those
// of a freshly built model, and into the BatchNorm ops of their graph:
// every learnable must be in the file by name with its shape and dtype,
// every BatchNorm op's statistics likewise, and every tensor of the file
// must be one of them. It checks the file and all of them before it
// changes any value; an error names the file and the learnable that
// differs.
func LoadModel(path string, learnables gorgonia.Nodes) error {
	s, _, err := readTensors(path, modelFormat, 0, nil)
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(learnables))
	bns := batchNorms(learnables)
	for i, bn := range bns {
		mean, variance := bn.Stats()
		for _, c := range []struct {
			what string
			have tensor.Tensor
		}{{"mean", mean}, {"variance", variance}} {
			key := bnKey(i, c.what)
			t, ok := s.Tensors[key]
			switch {
			case !ok:
				return errors.Errorf("checkpoint: %s has no %s: the model has %d BatchNorm ops (another model, or saved without its statistics?)", path, key, len(bns))
			case c.have == nil || !t.Shape().Eq(c.have.Shape()) || t.Dtype() != c.have.Dtype():
				return errors.Errorf("checkpoint: %s: %s is %v %v in the file, not the model's", path, key, t.Shape(), t.Dtype())
			}
			seen[key] = true
		}
	}
	for _, n := range learnables {
		name := n.Name()
		if seen[name] {
			return errors.Errorf("checkpoint: two learnables are named %q", name)
		}
		seen[name] = true
		t, ok := s.Tensors[name]
		if !ok {
			return errors.Errorf("checkpoint: %s has no tensor for learnable %q (another model?)", path, name)
		}
		if !t.Shape().Eq(n.Shape()) || t.Dtype() != n.Dtype() {
			return errors.Errorf("checkpoint: %s: learnable %q is %v %v in the file, %v %v in the model", path, name, t.Shape(), t.Dtype(), n.Shape(), n.Dtype())
		}
		switch v := n.Value().(type) {
		case nil, *gorgonia.F32, *gorgonia.F64:
		case *tensor.Dense:
			if v.RequiresIterator() {
				return errors.Errorf("checkpoint: learnable %q holds a view; load into the model's own tensors", name)
			}
		default:
			return errors.Errorf("checkpoint: learnable %q holds %T", name, v)
		}
	}
	for name := range s.Tensors {
		if !seen[name] {
			return errors.Errorf("checkpoint: %s holds %q, which the model does not have (another model?)", path, name)
		}
	}
	for i, bn := range bns {
		if err := bn.SetStats(s.Tensors[bnKey(i, "mean")], s.Tensors[bnKey(i, "variance")]); err != nil {
			return errors.Wrapf(err, "checkpoint: BatchNorm op %d", i) // unreachable: checked above
		}
	}
	for _, n := range learnables {
		t := s.Tensors[n.Name()].(*tensor.Dense)
		switch v := n.Value().(type) {
		case nil:
			if err := gorgonia.Let(n, t); err != nil {
				return errors.Wrapf(err, "checkpoint: loading learnable %q", n.Name())
			}
		case *gorgonia.F32:
			*v = gorgonia.F32(t.Data().(float32))
		case *gorgonia.F64:
			*v = gorgonia.F64(t.Data().(float64))
		case *tensor.Dense:
			copyDense(v, t)
		}
	}
	return nil
}

// copyDense copies src into dst, dense tensors of one dtype and shape.
func copyDense(dst, src *tensor.Dense) {
	switch dst.Dtype() {
	case tensor.Float32:
		copy(dst.Float32s(), src.Float32s())
	case tensor.Float64:
		copy(dst.Float64s(), src.Float64s())
	case tensor.Int64:
		copy(dst.Int64s(), src.Int64s())
	case tensor.Int32:
		copy(dst.Int32s(), src.Int32s())
	}
}
