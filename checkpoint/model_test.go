package checkpoint_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestSavedModelGivesItsAccuracyBack trains the zoo CNN (BatchNorm) a
// little, saves it, loads it into a freshly built CNN, and measures the
// same test accuracy, exactly.
func TestSavedModelGivesItsAccuracyBack(t *testing.T) {
	if testing.Short() {
		t.Skip("trains and evaluates the CNN")
	}
	r, err := zoo.RecipeFor("cnn")
	require.NoError(t, err)
	trainSet, test, err := r.Load("embedded", 16*4*3)
	require.NoError(t, err)
	test = test.(*zoo.Dataset).Head(160)
	var trained *zoo.Model
	build := func(batch int, seed int64) (*zoo.Model, error) {
		m, err := zoo.CNN(batch, seed)
		trained = m
		return m, err
	}
	cfg, err := train.FromRecipe(r, train.MethodSequential, 1)
	require.NoError(t, err)
	cfg.Epochs, cfg.Stages = 1, 2
	res, err := train.Train(context.Background(), build, trainSet, test, cfg)
	require.NoError(t, err)

	path := filepath.Join(t.TempDir(), "model"+checkpoint.ModelExt)
	require.NoError(t, checkpoint.SaveModel(path, trained.Learnables))

	fresh, err := zoo.CNN(cfg.Microbatch, cfg.Seed)
	require.NoError(t, err)
	before := accuracy(t, fresh, test)
	require.NotEqual(t, res.Accuracy, before, "the check can fail: a fresh CNN scores otherwise")
	require.NoError(t, checkpoint.LoadModel(path, fresh.Learnables))
	require.Equal(t, res.Accuracy, accuracy(t, fresh, test))
	for i, n := range fresh.Learnables {
		require.Equal(t, trained.Learnables[i].Value().Data(), n.Value().Data(), n.Name())
	}
	for i, bn := range fresh.BatchNorms {
		m, v := bn.Stats()
		tm, tv := trained.BatchNorms[i].Stats()
		require.Equal(t, tm.Data(), m.Data())
		require.Equal(t, tv.Data(), v.Data())
	}
}

func accuracy(t *testing.T, m *zoo.Model, d zoo.Data) float64 {
	t.Helper()
	ev, err := train.NewEvaluator(m)
	require.NoError(t, err)
	defer ev.Close()
	acc, err := ev.Accuracy(d)
	require.NoError(t, err)
	return acc
}

// values snapshots learnables' values, to check that a refused load
// changed nothing.
func values(ns gorgonia.Nodes) []interface{} {
	out := make([]interface{}, len(ns))
	for i, n := range ns {
		switch v := n.Value().(type) {
		case tensor.Tensor:
			out[i] = v.Clone().(tensor.Tensor).Data()
		default:
			out[i] = v.Data()
		}
	}
	return out
}

func TestLoadModelRefusesAnotherModel(t *testing.T) {
	dir := t.TempDir()
	m32, err := testmodels.MLP(tensor.Float32, 4, 1)
	require.NoError(t, err)
	path := filepath.Join(dir, "mlp"+checkpoint.ModelExt)
	require.NoError(t, checkpoint.SaveModel(path, m32.Learnables))

	m64, err := testmodels.MLP(tensor.Float64, 4, 2)
	require.NoError(t, err)
	before := values(m64.Learnables)
	require.ErrorContains(t, checkpoint.LoadModel(path, m64.Learnables), `: learnable "mlp.fc1.W" is (16, 16) float32 in the file, (16, 16) float64 in the model`)
	require.Equal(t, before, values(m64.Learnables), "nothing loaded")

	cnn, err := testmodels.CNN(tensor.Float32, 4, 1)
	require.NoError(t, err)
	require.ErrorContains(t, checkpoint.LoadModel(path, cnn.Learnables), "has no batchnorm/0/mean: the model has 2 BatchNorm ops")

	// The last learnable is the one that differs: the others stay.
	other, err := testmodels.MLP(tensor.Float32, 4, 3)
	require.NoError(t, err)
	g := other.Learnables[0].Graph()
	odd := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(3, 5), gorgonia.WithName("mlp.fc3.b"), gorgonia.WithInit(gorgonia.Zeroes()))
	mixed := append(append(gorgonia.Nodes{}, other.Learnables[:5]...), odd)
	before = values(mixed)
	require.ErrorContains(t, checkpoint.LoadModel(path, mixed), `learnable "mlp.fc3.b" is (1, 4) float32 in the file, (3, 5) float32 in the model`)
	require.Equal(t, before, values(mixed), "nothing loaded")
	require.ErrorContains(t, checkpoint.LoadModel(path, other.Learnables[:5]), `holds "mlp.fc3.b", which the model does not have`)

	require.NoError(t, checkpoint.LoadModel(path, other.Learnables))
	require.Equal(t, values(m32.Learnables), values(other.Learnables))
}

func TestModelFileDamageIsNamed(t *testing.T) {
	dir := t.TempDir()
	m, err := testmodels.CNN(tensor.Float32, 4, 1)
	require.NoError(t, err)
	path := filepath.Join(dir, "cnn"+checkpoint.ModelExt)
	require.NoError(t, checkpoint.SaveModel(path, m.Learnables))
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		bad  []byte
		want string
	}{
		{"truncated", good[:len(good)-100], "not a valid safetensors file"},
		{"a flipped bit in the data", flip(good, len(good)-7), "the tensors' SHA-256 is"},
		{"a flipped bit in the header", flip(good, 12), "not a valid safetensors file"},
		{"empty", nil, "not a valid safetensors file"},
	} {
		require.NoError(t, os.WriteFile(path, c.bad, 0o644))
		err := checkpoint.LoadModel(path, m.Learnables)
		require.ErrorContains(t, err, path+": ", c.name)
		require.ErrorContains(t, err, c.want, c.name)
	}
	fi := filepath.Join(dir, "shard")
	require.NoError(t, os.MkdirAll(fi, 0o755))
	info, err := checkpoint.WriteShard(fi, 0, checkpoint.Shard{Tensors: map[string]tensor.Tensor{"x": tensor.New(tensor.FromScalar(1.0))}})
	require.NoError(t, err)
	require.ErrorContains(t, checkpoint.LoadModel(filepath.Join(fi, info.Name), m.Learnables), `format "pipemare.shard/1", want "pipemare.model/1"`)
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x10
	return c
}

func TestModelWithScalarsAndDuplicates(t *testing.T) {
	g := gorgonia.NewGraph()
	s := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("s"), gorgonia.WithValue(math.Pi))
	w := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithName("w"), gorgonia.WithShape(2), gorgonia.WithValue(tensor.New(tensor.WithBacking([]float32{1, 2}))))
	path := filepath.Join(t.TempDir(), "m"+checkpoint.ModelExt)
	require.NoError(t, checkpoint.SaveModel(path, gorgonia.Nodes{s, w}))
	g2 := gorgonia.NewGraph()
	s2 := gorgonia.NewScalar(g2, tensor.Float64, gorgonia.WithName("s"), gorgonia.WithValue(0.0))
	w2 := gorgonia.NewVector(g2, tensor.Float32, gorgonia.WithName("w"), gorgonia.WithShape(2), gorgonia.WithInit(gorgonia.Zeroes()))
	require.NoError(t, checkpoint.LoadModel(path, gorgonia.Nodes{w2, s2}))
	require.Equal(t, math.Pi, s2.Value().Data())
	require.Equal(t, []float32{1, 2}, w2.Value().Data())

	dup := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithName("w"), gorgonia.WithShape(2), gorgonia.WithInit(gorgonia.Zeroes()))
	require.ErrorContains(t, checkpoint.SaveModel(path, gorgonia.Nodes{w, dup}), `two learnables are named "w"`)
	bn := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithName("batchnorm/0/mean"), gorgonia.WithShape(2), gorgonia.WithInit(gorgonia.Zeroes()))
	require.ErrorContains(t, checkpoint.SaveModel(path, gorgonia.Nodes{bn}), "are the BatchNorm statistics'")
}
