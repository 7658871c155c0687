package stage

import (
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/correction"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/rescheduler"
	"github.com/pipemare/pipemare/solvers"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// chainStage is one pipeline stage as far as a checkpoint goes: a model
// trained step by step and its solver chain T1(T2(Momentum)).
type chainStage struct {
	m      *testmodels.Model
	vm     gorgonia.VM
	solver gorgonia.Solver
}

func newChainStage(t *testing.T) *chainStage {
	t.Helper()
	m, err := testmodels.MLP(tensor.Float32, 4, 1)
	require.NoError(t, err)
	_, err = gorgonia.Grad(m.Cost, m.Learnables...)
	require.NoError(t, err)
	vm := gorgonia.NewTapeMachine(m.Graph, gorgonia.BindDualValues(m.Learnables...))
	t.Cleanup(func() { vm.Close() })
	mom, err := solvers.NewMomentum(solvers.WithLearnRate(0.05))
	require.NoError(t, err)
	t2, err := correction.New(mom, correction.WithGamma(0.8))
	require.NoError(t, err)
	t1, err := rescheduler.New(t2, rescheduler.WithPhase(10))
	require.NoError(t, err)
	t1.SetDelay(2, false)
	return &chainStage{m: m, vm: vm, solver: t1}
}

func (s *chainStage) train(t *testing.T, from, n int) {
	t.Helper()
	for step := from; step < from+n; step++ {
		for i, v := range s.m.Batch(rand.New(rand.NewSource(int64(step)))) {
			require.NoError(t, gorgonia.Let(s.m.Inputs[i], v))
		}
		require.NoError(t, s.vm.RunAll())
		require.NoError(t, s.solver.Step(gorgonia.NodesToValueGrads(s.m.Learnables)))
		s.vm.Reset()
	}
}

// shard is what a stage puts in its shard of its weights and of every
// layer of its solver.
func (s *chainStage) shard(t *testing.T) checkpoint.Shard {
	t.Helper()
	sh := checkpoint.Shard{Tensors: map[string]tensor.Tensor{}, Ints: map[string]int64{}, Floats: map[string]float64{}, Strings: map[string]string{}}
	states, err := solvers.Save(s.solver)
	require.NoError(t, err)
	putSolverStates(&sh, "solver", states)
	for _, n := range s.m.Learnables {
		sh.Tensors["weights/"+n.Name()] = n.Value().(tensor.Tensor)
	}
	sh.Ints["version"] = int64(s.solver.(*rescheduler.Solver).Steps())
	return sh
}

func (s *chainStage) restore(t *testing.T, sh checkpoint.Shard) {
	t.Helper()
	for _, n := range s.m.Learnables {
		require.NoError(t, gorgonia.Let(n, sh.Tensors["weights/"+n.Name()]))
	}
	states, err := solverStates(sh, "solver")
	require.NoError(t, err)
	require.NoError(t, solvers.Bind(s.solver, gorgonia.NodesToValueGrads(s.m.Learnables)))
	require.NoError(t, solvers.Load(s.solver, states))
}

// TestSolverChainThroughACheckpoint: a stage's weights and T1(T2(Momentum))
// saved in a committed checkpoint after 4 steps and restored into a fresh
// stage continue bit-identically to a stage that never stopped.
func TestSolverChainThroughACheckpoint(t *testing.T) {
	whole, first, rest := newChainStage(t), newChainStage(t), newChainStage(t)
	whole.train(t, 0, 9)
	first.train(t, 0, 4)

	root := t.TempDir()
	dir, err := checkpoint.Begin(root, 4)
	require.NoError(t, err)
	fi, err := checkpoint.WriteShard(dir, 0, first.shard(t))
	require.NoError(t, err)
	_, err = checkpoint.Commit(root, checkpoint.Manifest{Step: 4, Fingerprint: "mlp", Stages: []checkpoint.FileInfo{fi}})
	require.NoError(t, err)

	c, err := checkpoint.Latest(root, checkpoint.WithFingerprint("mlp"))
	require.NoError(t, err)
	sh, err := c.Shard(0)
	require.NoError(t, err)
	require.Equal(t, int64(4), sh.Ints["version"])
	rest.restore(t, sh)
	rest.train(t, 4, 5)
	for i, n := range whole.m.Learnables {
		require.Equal(t, n.Value().Data(), rest.m.Learnables[i].Value().Data(), n.Name())
	}
	ws, err := solvers.Save(whole.solver)
	require.NoError(t, err)
	rs, err := solvers.Save(rest.solver)
	require.NoError(t, err)
	require.Equal(t, ws, rs)

	_, err = solverStates(checkpoint.Shard{}, "solver")
	require.ErrorContains(t, err, `no solver states under "solver"`)
}
