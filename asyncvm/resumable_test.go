package asyncvm

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/correction"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/method"
	"github.com/pipemare/pipemare/rescheduler"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/solvers"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// pipeMare is PipeMare's stage solver as a method value builds it: T1 over
// t1 steps around T2 (γ = gamma) around Momentum(0.9) at the rate 0.05.
func pipeMare(t1 int, gamma float64) func(int) (gorgonia.Solver, error) {
	m := method.PipeMare()
	m.Optimizer, m.Rate = method.Momentum{Beta: 0.9}, rescheduler.Constant(0.05)
	m.T1, m.Techniques = t1, []method.Technique{method.T2{Gamma: gamma}}
	return m.Solver
}

// resumableSolvers are the library's solvers that keep state, alone and
// decorated, as stage factories.
func resumableSolvers() []struct {
	name string
	make func(int) (gorgonia.Solver, error)
} {
	mom := func() (gorgonia.Solver, error) {
		return solvers.NewMomentum(solvers.WithLearnRate(0.05), solvers.WithMomentum(0.9))
	}
	return []struct {
		name string
		make func(int) (gorgonia.Solver, error)
	}{
		{"sgd", func(int) (gorgonia.Solver, error) { return solvers.NewSGD(solvers.WithLearnRate(0.05)) }},
		{"momentum", func(int) (gorgonia.Solver, error) { return mom() }},
		{"adam", func(int) (gorgonia.Solver, error) { return solvers.NewAdam(solvers.WithLearnRate(0.01)) }},
		{"nadam", func(int) (gorgonia.Solver, error) { return solvers.NewNAdam(solvers.WithNAdamLearnRate(0.01)) }},
		{"t1-t2-momentum", pipeMare(6, 0.9)},
		{"spike-momentum", func(int) (gorgonia.Solver, error) {
			m, err := mom()
			if err != nil {
				return nil, err
			}
			return correction.NewSpike(m)
		}},
		{"predictor-momentum", func(int) (gorgonia.Solver, error) {
			m, err := mom()
			if err != nil {
				return nil, err
			}
			return correction.NewPredictor(m)
		}},
	}
}

// layout is one way to cut a model.
type layout struct {
	name  string
	build testmodels.Builder
	split []graphsplit.Option
	sig   string // how many learnables each stage owns and replicates
}

// resumableLayouts are every cut of the test models into two stages (some
// leave a stage owning nothing, or only a replica of another stage's
// learnable) and their fine-grained cuts (the GRU's has stages holding only
// replicas). With short, one layout per distinct signature of owned and
// replicated learnables per model.
func resumableLayouts(t *testing.T, short bool) []layout {
	var out []layout
	seen := map[string]bool{}
	add := func(l layout, plan *graphsplit.Plan) {
		var sig []string
		for _, s := range plan.Stages {
			own, rep := 0, 0
			for i := range s.Learnables {
				if s.Replica(i) {
					rep++
				} else {
					own++
				}
			}
			sig = append(sig, fmt.Sprintf("%d+%dr", own, rep))
		}
		l.sig = strings.Join(sig, ",")
		if short && seen[l.name[:strings.IndexByte(l.name, '/')]+l.sig] {
			return
		}
		seen[l.name[:strings.IndexByte(l.name, '/')]+l.sig] = true
		out = append(out, l)
	}
	for _, nb := range []testmodels.NamedBuilder{{Name: "mlp", Build: testmodels.MLP}, {Name: "tied", Build: testmodels.Tied}, {Name: "penalty", Build: testmodels.Penalty}, {Name: "gru", Build: testmodels.GRU}} {
		split := func(opts ...graphsplit.Option) (*graphsplit.Plan, error) {
			m, err := nb.Build(tensor.Float64, 4, 1)
			require.NoError(t, err)
			return graphsplit.Split(m.Graph, m.Cost, m.Learnables, opts...)
		}
		fine, err := split(graphsplit.FineGrained())
		require.NoError(t, err)
		add(layout{name: nb.Name + "/fine", build: nb.Build, split: []graphsplit.Option{graphsplit.FineGrained()}}, fine)
		if nb.Name == "gru" { // its two-stage cuts are the others' again, and slow
			continue
		}
		for j := 1; ; j++ {
			plan, err := split(graphsplit.CutAtOps(j))
			if err != nil {
				require.ErrorContains(t, err, "is not between 1 and")
				break
			}
			add(layout{name: fmt.Sprintf("%s/cut%d", nb.Name, j), build: nb.Build, split: []graphsplit.Option{graphsplit.CutAtOps(j)}}, plan)
		}
	}
	return out
}

// TestEveryCheckpointResumes: for every layout of the test models — stages
// owning learnables, none, or only replicas — and every stateful solver,
// a checkpoint taken mid-run resumes in a fresh VM that continues to the
// uninterrupted run's weights, bit for bit.
func TestEveryCheckpointResumes(t *testing.T) {
	const n, first, more = 2, 3, 2
	ctx := context.Background()
	for _, l := range resumableLayouts(t, testing.Short()) {
		for _, s := range resumableSolvers() {
			t.Run(l.name+"/"+s.name, func(t *testing.T) {
				build := func() (*testmodels.Model, *VM) {
					m, err := l.build(tensor.Float64, 4, 1)
					require.NoError(t, err)
					plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, l.split...)
					require.NoError(t, err)
					vm, err := New(plan, WithMicrobatches(n), WithSchedule(schedule.PipeMare()), WithSolverFactory(s.make))
					require.NoError(t, err)
					return m, vm
				}
				m, vm := build()
				defer vm.Close()
				d := makeData(m, n*(first+more), 3)
				for k := 0; k < first; k++ {
					_, err := vm.Step(ctx, d.minibatch(t, m.Inputs, k, n))
					require.NoError(t, err)
				}
				dir, err := vm.Checkpoint(ctx, t.TempDir(), checkpoint.Manifest{}, 0)
				require.NoError(t, err, "layout %s", l.sig)
				for k := first; k < first+more; k++ {
					_, err := vm.Step(ctx, d.minibatch(t, m.Inputs, k, n))
					require.NoError(t, err)
				}
				require.NoError(t, vm.Flush(ctx))
				want := snapshot(t, m.LearnableValues())

				m2, vm2 := build()
				defer vm2.Close()
				_, err = vm2.Resume(ctx, dir)
				require.NoError(t, err, "layout %s", l.sig)
				for k := first; k < first+more; k++ {
					_, err := vm2.Step(ctx, d.minibatch(t, m2.Inputs, k, n))
					require.NoError(t, err)
				}
				require.NoError(t, vm2.Flush(ctx))
				require.True(t, bitsEqual(want, m2.LearnableValues()), "layout %s: the resumed run continues bit for bit", l.sig)
			})
		}
	}
}

// forgetful is a solver decorator whose saved state its own LoadState
// refuses: what a checkpoint that cannot be resumed is made of.
type forgetful struct {
	inner gorgonia.Solver
	steps int64
}

func (f *forgetful) Step(m []gorgonia.ValueGrad) error { f.steps++; return f.inner.Step(m) }
func (f *forgetful) Inner() gorgonia.Solver            { return f.inner }
func (f *forgetful) SaveState() (solvers.State, error) {
	return solvers.State{Kind: "forgetful", Ints: map[string]int64{"steps": f.steps}}, nil
}
func (f *forgetful) CheckState(st solvers.State) error {
	return st.Check("forgetful", []string{"steps", "remembered"}, nil)
}
func (f *forgetful) LoadState(st solvers.State) error {
	if err := f.CheckState(st); err != nil {
		return err
	}
	f.steps = st.Ints["steps"]
	return nil
}

// TestCheckpointRefusesWhatWouldNotResume: a stage whose shard, read back,
// would not restore makes Checkpoint fail, naming the stage, the file and
// why; LATEST still names the previous checkpoint, which resumes. So does
// Save for a state Restore would refuse.
func TestCheckpointRefusesWhatWouldNotResume(t *testing.T) {
	ctx := context.Background()
	var bad bool
	factory := func(i int) (gorgonia.Solver, error) {
		s, err := solvers.NewSGD(solvers.WithLearnRate(0.05))
		if err != nil || i != 1 || !bad {
			return s, err
		}
		return &forgetful{inner: s}, nil
	}
	build := func() (*testmodels.Model, *VM) {
		m, err := testmodels.MLP(tensor.Float64, 4, 1)
		require.NoError(t, err)
		plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
		require.NoError(t, err)
		vm, err := New(plan, WithMicrobatches(2), WithSolverFactory(factory))
		require.NoError(t, err)
		return m, vm
	}
	root := t.TempDir()
	m, good := build()
	defer good.Close()
	d := makeData(m, 4, 1)
	_, err := good.Step(ctx, d.minibatch(t, m.Inputs, 0, 2))
	require.NoError(t, err)
	first, err := good.Checkpoint(ctx, root, checkpoint.Manifest{}, 0)
	require.NoError(t, err)

	bad = true
	m, vm := build()
	defer vm.Close()
	for k := 0; k < 2; k++ {
		_, err := vm.Step(ctx, d.minibatch(t, m.Inputs, k, 2))
		require.NoError(t, err)
	}
	_, err = vm.Checkpoint(ctx, root, checkpoint.Manifest{}, 0)
	require.ErrorContains(t, err, "stage 1: the shard it wrote, "+root+"/step-000000000002/")
	require.ErrorContains(t, err, `would not resume: stage 1: solvers: loading layer 0: solvers: forgetful state: missing int "remembered"`)
	_, err = vm.Save(ctx)
	require.ErrorContains(t, err, `the snapshot it took would not restore: stage 1: solvers: loading layer 0: solvers: forgetful state: missing int "remembered"`)
	_, err = vm.Step(ctx, d.minibatch(t, m.Inputs, 0, 2))
	require.NoError(t, err, "a refused checkpoint does not stop the pipeline")

	bad = false
	_, fresh := build()
	defer fresh.Close()
	man, err := fresh.Resume(ctx, root)
	require.NoError(t, err, "the root resumes from LATEST, which still names the checkpoint before")
	require.Equal(t, int64(1), man.Step)
	latest, err := checkpoint.Latest(root)
	require.NoError(t, err)
	require.Equal(t, first, latest.Dir)

	_, again := build()
	defer again.Close()
	_, err = again.Resume(ctx, filepath.Join(root, "step-000000000002"))
	require.ErrorContains(t, err, "incomplete checkpoint", "the checkpoint Checkpoint refused has no manifest")
}

// TestWithCheckpointsRefusesHiddenSolverState: with WithCheckpoints, the
// README's old recipe — T1 around T2 around gorgonia's Momentum, which
// hides its velocity — is refused at New, naming the stage, the layer and
// the solver to use, instead of at the first Checkpoint after training.
// The same chain around solvers.NewMomentum is accepted.
func TestWithCheckpointsRefusesHiddenSolverState(t *testing.T) {
	m, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	chain := func(inner func() gorgonia.Solver) func(int) (gorgonia.Solver, error) {
		return func(int) (gorgonia.Solver, error) {
			t2, err := correction.New(inner(), correction.WithGammaFromD(0.1))
			if err != nil {
				return nil, err
			}
			return rescheduler.New(t2, rescheduler.WithPhase(10))
		}
	}
	hidden := chain(func() gorgonia.Solver { return gorgonia.NewMomentum(gorgonia.WithLearnRate(0.05)) })
	vm, err := New(plan, WithMicrobatches(2), WithSolverFactory(hidden), WithCheckpoints())
	require.ErrorContains(t, err, "asyncvm: stage 0: WithCheckpoints: the solver factory's solver cannot be checkpointed: solvers: layer 2 of *rescheduler.Solver > *correction.Solver > *gorgonia.Momentum cannot save its state")
	require.ErrorContains(t, err, "solvers.NewMomentum for gorgonia.NewMomentum, bit for bit")
	require.Nil(t, vm)

	vm, err = New(plan, WithMicrobatches(2), WithSolverFactory(hidden))
	require.NoError(t, err, "without WithCheckpoints, nothing asks for the state")
	require.NoError(t, vm.Close())

	ours := chain(func() gorgonia.Solver {
		s, err := solvers.NewMomentum(solvers.WithLearnRate(0.05))
		require.NoError(t, err)
		return s
	})
	vm, err = New(plan, WithMicrobatches(2), WithSolverFactory(ours), WithCheckpoints())
	require.NoError(t, err)
	require.NoError(t, vm.Close())
}
