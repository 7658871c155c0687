package tape

import (
	"hash"
	"hash/fnv"
	"testing"

	"github.com/chewxy/hm"
	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestProgramLeavesOutWhatNothingReads: an op whose result no Read target
// depends on does not run, and is listed by Pruned, not Ops; an Effectful
// one runs though nothing reads it; the tape machine runs every op.
func TestProgramLeavesOutWhatNothingReads(t *testing.T) {
	g := G.NewGraph()
	x := G.NewVector(g, tensor.Float32, G.WithShape(3), G.WithName("x"), G.WithValue(tensor.New(tensor.WithBacking([]float32{1, 2, 3}))))
	read, unread := &countOp{name: "read"}, &countOp{name: "unread"}
	effect := &effectOp{countOp{name: "effect"}}
	var nodes []*G.Node
	for _, op := range []G.Op{read, unread, effect} {
		n, err := G.ApplyOp(op, x)
		require.NoError(t, err)
		nodes = append(nodes, n)
	}
	var got G.Value
	G.Read(nodes[0], &got)
	p := Compile(g, false)
	defer p.Close()
	for range 3 {
		require.NoError(t, p.Run())
	}
	require.Equal(t, []float32{1, 2, 3}, got.Data())
	require.Equal(t, [3]int{3, 0, 3}, [3]int{read.runs, unread.runs, effect.runs})
	var ran, pruned []string
	for _, o := range p.Ops() {
		ran = append(ran, o.Op.String())
	}
	for _, o := range p.Pruned() {
		pruned = append(pruned, o.Op.String())
	}
	require.Equal(t, []string{"read", "effect"}, ran)
	require.Equal(t, []string{"unread"}, pruned)

	require.NoError(t, p.RunTape())
	require.Equal(t, 1, unread.runs, "the tape machine runs every op")
}

// countOp is the identity, counting its runs; its name tells it apart.
type countOp struct {
	name string
	runs int
}

func (*countOp) Arity() int { return 1 }
func (*countOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (*countOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	return ds[0].(tensor.Shape).Clone(), nil
}
func (op *countOp) Do(v ...G.Value) (G.Value, error) {
	op.runs++
	return v[0].(tensor.Tensor).Clone().(G.Value), nil
}
func (*countOp) ReturnsPtr() bool         { return false }
func (*countOp) CallsExtern() bool        { return false }
func (*countOp) OverwritesInput() int     { return -1 }
func (op *countOp) WriteHash(h hash.Hash) { h.Write([]byte(op.name)) }
func (op *countOp) Hashcode() uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}
func (op *countOp) String() string { return op.name }

// effectOp is a countOp with an effect beyond its result (Effectful).
type effectOp struct{ countOp }

func (*effectOp) HasEffects() {}
