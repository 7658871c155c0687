package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

func sampleShard() Shard {
	return Shard{
		Tensors: map[string]tensor.Tensor{
			"weights/fc1.W": tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, -2, 3.5, 0, float32(math.Inf(-1)), 1e-30})),
			"weights/fc1.b": tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{0.1, 0.2, math.NaN()})),
			"bn/mean":       tensor.New(tensor.FromScalar(float32(0.25))),
			"counts":        tensor.New(tensor.WithShape(2), tensor.WithBacking([]int64{-7, 1 << 40})),
			"mask":          tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]int32{3, -4})),
			"empty":         tensor.New(tensor.WithShape(0, 4), tensor.Of(tensor.Float32)),
		},
		Ints:    map[string]int64{"version": 12, "negative": -3},
		Floats:  map[string]float64{"tau": 2.5, "third": 1.0 / 3, "inf": math.Inf(1)},
		Strings: map[string]string{"solver/0": "solvers.Momentum", "note": "ünïcode and \"quotes\""},
	}
}

// requireSameShard compares shards element by element, bits included.
func requireSameShard(t *testing.T, want, got Shard) {
	t.Helper()
	if len(want.Ints)+len(got.Ints) > 0 {
		require.Equal(t, want.Ints, got.Ints)
	}
	if len(want.Strings)+len(got.Strings) > 0 {
		require.Equal(t, want.Strings, got.Strings)
	}
	require.Len(t, got.Floats, len(want.Floats))
	for k, v := range want.Floats {
		require.Equal(t, math.Float64bits(v), math.Float64bits(got.Floats[k]), k)
	}
	require.Len(t, got.Tensors, len(want.Tensors))
	for name, w := range want.Tensors {
		g := got.Tensors[name]
		require.NotNil(t, g, name)
		require.Equal(t, w.Shape(), g.Shape(), name)
		require.Equal(t, w.Dtype(), g.Dtype(), name)
		wv, gv := toViewMust(t, name, w), toViewMust(t, name, g)
		require.Equal(t, wv.data, gv.data, "%s: the bytes", name)
	}
}

func toViewMust(t *testing.T, name string, x tensor.Tensor) view {
	v, _, err := toView(name, x)
	require.NoError(t, err)
	return v
}

func TestShardRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := sampleShard()
	fi, err := WriteShard(dir, 2, want)
	require.NoError(t, err)
	require.Equal(t, "stage-002.safetensors", fi.Name)
	st, err := os.Stat(filepath.Join(dir, fi.Name))
	require.NoError(t, err)
	require.Equal(t, st.Size(), fi.Size)
	require.Equal(t, []TensorInfo{
		{"bn/mean", "float32", []int{}}, {"counts", "int64", []int{2}}, {"empty", "float32", []int{0, 4}},
		{"mask", "int32", []int{1, 2}}, {"weights/fc1.W", "float32", []int{2, 3}}, {"weights/fc1.b", "float64", []int{3}},
	}, fi.Tensors)
	got, err := ReadShard(dir, 2, fi)
	require.NoError(t, err)
	requireSameShard(t, want, got)
	require.Equal(t, float32(0.25), got.Tensors["bn/mean"].Data(), "a 0-d tensor comes back 0-d")

	again, err := WriteShard(t.TempDir(), 2, want)
	require.NoError(t, err)
	require.Equal(t, fi, again, "the same shard gives the same bytes")

	_, err = ReadShard(dir, 3, FileInfo{Name: "stage-002.safetensors"})
	require.ErrorContains(t, err, `the manifest names the shard "stage-002.safetensors", want "stage-003.safetensors"`)
}

// TestShardOfAView: a sliced view's Data is its backing array from the
// view's offset (here 2..11), not its elements (2 3 6 7 10 11); the shard
// holds the elements.
func TestShardOfAView(t *testing.T) {
	m := tensor.New(tensor.WithShape(3, 4), tensor.WithBacking([]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}))
	v, err := m.Slice(nil, tensor.S(2, 4))
	require.NoError(t, err)
	require.NotEqual(t, []float32{2, 3, 6, 7, 10, 11}, v.Data(), "the trap the shard must avoid")
	dir := t.TempDir()
	fi, err := WriteShard(dir, 0, Shard{Tensors: map[string]tensor.Tensor{"v": v}})
	require.NoError(t, err)
	got, err := ReadShard(dir, 0, fi)
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{3, 2}, got.Tensors["v"].Shape())
	require.Equal(t, []float32{2, 3, 6, 7, 10, 11}, got.Tensors["v"].Data())
}

// TestShardIsSafetensors reads a shard's header as the safetensors
// specification lays it out.
func TestShardIsSafetensors(t *testing.T) {
	dir := t.TempDir()
	fi, err := WriteShard(dir, 1, sampleShard())
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, fi.Name))
	require.NoError(t, err)
	n := binary.LittleEndian.Uint64(b)
	require.Zero(t, (8+n)%8, "the data starts 8-byte aligned")
	var header map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b[8:8+n], &header))
	var w struct {
		Dtype   string    `json:"dtype"`
		Shape   []int     `json:"shape"`
		Offsets [2]uint64 `json:"data_offsets"`
	}
	require.NoError(t, json.Unmarshal(header["weights/fc1.W"], &w))
	require.Equal(t, "F32", w.Dtype)
	require.Equal(t, []int{2, 3}, w.Shape)
	data := b[8+n:]
	require.Equal(t, uint32(math.Float32bits(3.5)), binary.LittleEndian.Uint32(data[w.Offsets[0]+8:]), "raw little-endian elements")
	var meta map[string]string
	require.NoError(t, json.Unmarshal(header["__metadata__"], &meta))
	require.Equal(t, "pipemare.shard/1", meta["format"])
	require.Equal(t, "1", meta["stage"])
	require.Equal(t, "12", meta["int.version"])
	require.Equal(t, "0.3333333333333333", meta["float.third"])
	require.Equal(t, "+Inf", meta["float.inf"])
	require.Len(t, meta["data_sha256"], 64)
}

func TestShardRefusesWhatItCannotHold(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		s    Shard
		want string
	}{
		{Shard{Tensors: map[string]tensor.Tensor{"x": tensor.New(tensor.WithShape(2), tensor.WithBacking([]bool{true, false}))}}, `tensor "x" is bool; a checkpoint holds float32, float64, int64 and int32`},
		{Shard{Tensors: map[string]tensor.Tensor{"x": nil}}, `tensor "x" is nil`},
		{Shard{Tensors: map[string]tensor.Tensor{"__metadata__": tensor.New(tensor.FromScalar(1.0))}}, `cannot be named "__metadata__"`},
		{Shard{Ints: map[string]int64{"": 1}}, `cannot be named ""`},
	} {
		_, err := WriteShard(dir, 0, c.s)
		require.ErrorContains(t, err, c.want)
	}
	_, err := WriteShard(dir, -1, Shard{})
	require.ErrorContains(t, err, "stage -1")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing written, no temporary file left")
}

// TestWriteAtomicLeavesNothingOnFailure: a write that fails midway leaves
// neither the file nor a temporary one, and an existing file untouched.
func TestWriteAtomicLeavesNothingOnFailure(t *testing.T) {
	dir := t.TempDir()
	_, _, err := writeAtomic(dir, "f", func(w io.Writer) error { return nil })
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("old"), 0o644))
	_, _, err = writeAtomic(dir, "f", func(w io.Writer) error {
		w.Write([]byte("partial new"))
		return os.ErrClosed
	})
	require.ErrorContains(t, err, "writing "+filepath.Join(dir, "f"))
	b, err := os.ReadFile(filepath.Join(dir, "f"))
	require.NoError(t, err)
	require.Equal(t, "old", string(b))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
}
