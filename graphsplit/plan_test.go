package graphsplit

import (
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func TestFineGrainedIsOneStagePerWeightLayer(t *testing.T) {
	for _, c := range []struct {
		build  testmodels.Builder
		stages int
	}{
		{testmodels.MLP, 3},       // fc1, fc2, fc3
		{testmodels.CNN, 3},       // conv1+bn1, conv2+bn2, fc
		{testmodels.ResNet, 8},    // stem, 3×2 block layers, head
		{testmodels.Attention, 5}, // Wq, Wk, Wv (with attention and layer norm), ff, head
	} {
		m, err := c.build(tensor.Float64, 4, 1)
		require.NoError(t, err)
		plan, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained())
		require.NoError(t, err)
		require.Len(t, plan.Stages, c.stages, m.Name)
		for _, st := range plan.Stages {
			weights := 0
			for _, l := range st.Learnables {
				if isWeight(l) {
					weights++
				}
			}
			require.Equal(t, 1, weights, "%s stage %d has learnables %v", m.Name, st.Index, st.Learnables)
		}
	}
}

func TestPortsRouteSkipConnections(t *testing.T) {
	m, err := testmodels.ResNet(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained())
	require.NoError(t, err)
	produced := map[int64]int{}
	jumps := 0
	for _, st := range plan.Stages {
		for _, in := range st.Inputs {
			switch in.Kind {
			case Activation:
				p, ok := produced[in.Key]
				require.True(t, ok, "stage %d reads %s before anyone produced it", st.Index, in.Name)
				require.Equal(t, p, in.Producer)
				require.Contains(t, in.Consumers, st.Index)
				if st.Index-p > 1 {
					jumps++
				}
			case Data:
				require.Equal(t, -1, in.Producer)
			}
		}
		for _, out := range st.Outputs {
			require.Equal(t, st.Index, out.Producer)
			produced[out.Key] = st.Index
			for _, c := range out.Consumers {
				require.Greater(t, c, st.Index)
			}
		}
	}
	require.Greater(t, jumps, 0, "the ResNet's skip connections must jump over stages")
	last := plan.Stages[len(plan.Stages)-1]
	require.True(t, last.Last())
	require.Equal(t, CostPort, last.Outputs[0].Kind)
	require.Equal(t, m.Cost, last.Outputs[0].Node)
	// Data: x in the first stage, labels y in the last.
	require.Equal(t, []int{0}, plan.Feeds[0].Consumers)
	require.Equal(t, []int{len(plan.Stages) - 1}, plan.Feeds[1].Consumers)
}

func TestStatefulOpsAreFlagged(t *testing.T) {
	m, err := testmodels.CNN(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained())
	require.NoError(t, err)
	kinds := []string{}
	for _, st := range plan.Stages {
		kinds = append(kinds, statefulKinds(st))
	}
	// conv1+bn1+relu+maxpool | conv2+bn2+relu | fc
	require.Equal(t, []string{"batchnorm-0.9-0.0,MaxPool", "batchnorm-0.9-0.0", "-"}, kinds)
	mlp, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err = Split(mlp.Graph, mlp.Cost, mlp.Learnables, FineGrained())
	require.NoError(t, err)
	for _, st := range plan.Stages {
		require.Empty(t, st.Stateful)
	}
}

func TestLearnablesShareTheUsersTensors(t *testing.T) {
	m, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained())
	require.NoError(t, err)
	for _, st := range plan.Stages {
		for i, l := range st.Learnables {
			require.Same(t, l.Value(), st.Forward.Learnables[i].Value())
			require.Same(t, l.Value(), st.Train.Learnables[i].Value())
			require.Equal(t, l, plan.Learnables[st.LearnableIndex[i]])
		}
	}
}

// TestRunLeavesInputsAloneAndLendsItsTensors: Run never writes its inputs;
// what it returns is the program's own, reused by the next runs (the
// learnables' gradients are written into the same tensors from the third
// run on), and a Clone is the caller's.
func TestRunLeavesInputsAloneAndLendsItsTensors(t *testing.T) {
	m, err := testmodels.Attention(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := Split(m.Graph, m.Cost, m.Learnables)
	require.NoError(t, err)
	defer plan.Close()
	batch := m.Batch(rand.New(rand.NewSource(3)))
	before := testmodels.SnapshotValues(batch)
	st := plan.Stages[0]
	in := make([]G.Value, len(st.Inputs))
	for i, p := range st.Inputs {
		for j, f := range m.Inputs {
			if f == p.Node {
				in[i] = batch[j]
			}
		}
	}
	one, err := scalarOne(tensor.Float64)
	require.NoError(t, err)
	r1, err := st.Train.Run(in, []G.Value{one})
	require.NoError(t, err)
	mine, err := r1.Clone()
	require.NoError(t, err)
	var runs []Result
	for range 3 {
		r, err := st.Train.Run(in, []G.Value{one})
		require.NoError(t, err)
		runs = append(runs, r)
	}
	for i := range batch {
		require.Equal(t, before[i].Data(), batch[i].Data(), "input %d was modified", i)
	}
	last := runs[len(runs)-1]
	require.Equal(t, mine.Outputs[0].Data(), last.Outputs[0].Data())
	reused := 0
	for i := range mine.LearnableGrads {
		require.NotSame(t, mine.LearnableGrads[i], last.LearnableGrads[i], "a clone is the caller's")
		require.Equal(t, mine.LearnableGrads[i].Data(), last.LearnableGrads[i].Data())
		if runs[1].LearnableGrads[i] == last.LearnableGrads[i] {
			reused++
		}
	}
	require.NotZero(t, reused, "no gradient tensor is reused")
}

func TestRunRejectsBadValues(t *testing.T) {
	m := newTiny(t)
	plan, err := Split(m.g, m.cost, G.Nodes{m.w1, m.w2})
	require.NoError(t, err)
	prog := plan.Stages[0].Forward
	good := tensor.New(tensor.WithShape(4, 3), tensor.Of(tensor.Float64))
	_, err = prog.Run(nil, nil)
	require.ErrorContains(t, err, "takes 1 inputs, got 0")
	_, err = prog.Run([]G.Value{tensor.New(tensor.WithShape(4, 4), tensor.Of(tensor.Float64))}, nil)
	require.ErrorContains(t, err, "stage 0 input 0 (stage0/in0/x): shape (4, 4), want (4, 3)")
	_, err = prog.Run([]G.Value{tensor.New(tensor.WithShape(4, 3), tensor.Of(tensor.Float32))}, nil)
	require.ErrorContains(t, err, "dtype float32, want float64")
	_, err = prog.Run([]G.Value{nil}, nil)
	require.ErrorContains(t, err, "value is nil")
	_, err = plan.Stages[0].Train.Run([]G.Value{good}, nil)
	require.ErrorContains(t, err, "takes 1 output gradients, got 0")
	require.ErrorContains(t, prog.BindLearnables([]G.Value{good, good}), "learnable 0")
	_, err = prog.Run([]G.Value{good}, nil)
	require.NoError(t, err)
}

func TestBindLearnablesSwapsWeights(t *testing.T) {
	m := newTiny(t)
	plan, err := Split(m.g, m.cost, G.Nodes{m.w1, m.w2})
	require.NoError(t, err)
	prog := plan.Stages[0].Forward
	x := tensor.New(tensor.WithShape(4, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}))
	r1, err := prog.Run([]G.Value{x}, nil)
	require.NoError(t, err)
	zero := []G.Value{
		tensor.New(tensor.WithShape(3, 5), tensor.Of(tensor.Float64)),
		tensor.New(tensor.WithShape(5, 2), tensor.Of(tensor.Float64)),
	}
	require.NoError(t, prog.BindLearnables(zero))
	r0, err := prog.Run([]G.Value{x}, nil)
	require.NoError(t, err)
	require.Equal(t, 0.0, r0.Outputs[0].Data())
	require.NoError(t, prog.BindLearnables(nil))
	r2, err := prog.Run([]G.Value{x}, nil)
	require.NoError(t, err)
	require.Equal(t, r1.Outputs[0].Data(), r2.Outputs[0].Data())
	require.NotEqual(t, 0.0, r1.Outputs[0].Data())
}

func TestTableAndDOT(t *testing.T) {
	m, err := testmodels.CNN(tensor.Float32, 4, 1)
	require.NoError(t, err)
	plan, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained())
	require.NoError(t, err)
	table := plan.String()
	lines := strings.Split(strings.TrimSpace(table), "\n")
	require.Len(t, lines, 1+len(plan.Stages), table)
	require.Contains(t, lines[0], "learnables")
	require.Contains(t, lines[1], "cnn.conv1.W,cnn.bn1.scale,cnn.bn1.bias")
	require.Contains(t, lines[3], "cnn.fc.W,cnn.fc.b")
	var dot strings.Builder
	require.NoError(t, plan.WriteDOT(&dot))
	for s := range plan.Stages {
		require.Contains(t, dot.String(), "subgraph cluster_"+string(rune('0'+s)))
	}
	// Two boundaries, each crossed by one activation.
	require.Equal(t, 2, strings.Count(dot.String(), "color=red"))
}

// TestProfiledBalancesByMeasuredTime: Profiled times the stages of a real
// model on this machine, leaves BatchNorm's statistics alone, records how
// even the stages came out, and its cut, given to CutAtOps, cuts the same
// graph into the same plan. A recomputing last stage is timed as one
// Train program only for a schedule that fuses it (fuseLast).
func TestProfiledBalancesByMeasuredTime(t *testing.T) {
	m, err := testmodels.CNN(tensor.Float64, 4, 1)
	require.NoError(t, err)
	feeds := map[*G.Node]G.Value{}
	for i, v := range m.Batch(rand.New(rand.NewSource(1))) {
		feeds[m.Inputs[i]] = v
	}
	mean, vari := m.BatchNorms[0].Stats()
	meanBefore := mean.Clone().(tensor.Tensor)
	variBefore := vari.Clone().(tensor.Tensor)
	for _, c := range []struct{ keep, fuse bool }{{false, true}, {true, true}, {false, false}} {
		keep := c.keep
		plan, err := Split(m.Graph, m.Cost, m.Learnables, Stages(3), Profiled(feeds, keep, c.fuse))
		require.NoError(t, err)
		require.Len(t, plan.Stages, 3)
		require.NotNil(t, plan.Balance)
		require.Len(t, plan.Balance.Times, 3)
		last := len(plan.Stages) - 1
		for s, st := range plan.Balance.Times {
			require.Positive(t, st.Forward, "stage %d", s)
			if s == last && c.fuse && !(keep && plan.CanKeep(s)) { // its Train program alone: the forward's time
				require.Zero(t, st.Backward, "the last stage, recomputing, runs its forward once")
				continue
			}
			require.Positive(t, st.Backward, "stage %d (keep %v, fuse %v): a last stage not fused runs Forward, then Train", s, keep, c.fuse)
		}
		require.GreaterOrEqual(t, plan.Balance.Spread, 1.0)
		require.NotEmpty(t, plan.Balance.Heaviest)
		again, err := Split(m.Graph, m.Cost, m.Learnables, CutAtOps(plan.Cuts()...))
		require.NoError(t, err)
		require.Equal(t, plan.Fingerprint(), again.Fingerprint(), "CutAtOps(Cuts()) cuts differently")
		require.Nil(t, again.Balance, "a plan cut without measuring has no measured balance")
		require.Equal(t, again.Costs(), plan.Costs(), "the costs a placement balances are estimated, whatever the cut was balanced by")
		require.Len(t, plan.Costs(), 3)
		for s, c := range plan.Costs() {
			require.Equal(t, float64(plan.Stages[s].Cost.FLOPs+plan.Stages[s].Cost.BackwardFLOPs+plan.Stages[s].Cost.Bytes), c, "stage %d", s)
		}
	}
	mean, vari = m.BatchNorms[0].Stats()
	require.Equal(t, meanBefore.Data(), mean.Data(), "profiling must not move BatchNorm's running mean")
	require.Equal(t, variBefore.Data(), vari.Data())

	delete(feeds, m.Inputs[1])
	_, err = Split(m.Graph, m.Cost, m.Learnables, Stages(2), Profiled(feeds, false, true))
	require.ErrorContains(t, err, `Profiled: no value for data input "cnn.y"`)
}

// TestProfiledConvergesOnTheMeasuredCut feeds Split's balancing synthetic
// stage times — each op costs what a hidden cost vector says, which the
// cost model gets wrong — and requires it to find the cut that is best for
// the hidden costs (one within 10 % of the mean where there is one), and to
// name the op that is heavier than a fair share.
func TestProfiledConvergesOnTheMeasuredCut(t *testing.T) {
	a := mlpAnalysis(t)
	n := len(a.seq)
	truth := make([]float64, n) // op q truly costs truth[q] ms
	for q := range truth {
		truth[q] = 1
	}
	heavy := n / 3
	truth[heavy] = float64(n) // one op holds half the work: its layer more than half
	measure := measuredAs(a, truth)
	optimum := func(p int) float64 { // the best largest stage under truth
		starts := append([]int{0}, balance(truth, p)...)
		most := 0.0
		for g, st := range starts {
			end := n
			if g+1 < len(starts) {
				end = starts[g+1]
			}
			sum := 0.0
			for q := st; q < end; q++ {
				sum += truth[q]
			}
			most = max(most, sum)
		}
		return most
	}
	for _, p := range []int{2, 3} {
		costs := make([]float64, n) // the model thinks the last op is all the work
		for q := range costs {
			costs[q] = 1
		}
		costs[n-1] = 100
		cfg := config{stages: p, setStages: true}
		cuts, bal, err := profiled(a, &cfg, costs, measure)
		require.NoError(t, err)
		a.assign(cuts)
		got, _ := measure(&Plan{Stages: make([]*Stage, p)})
		most := 0.0
		for _, st := range got {
			most = max(most, float64(st.Total())/float64(time.Millisecond))
		}
		mean := float64(2*n-1) / float64(p)
		if optimum(p) <= maxSpread*mean { // a cut within 10 % of the mean exists: one is found
			require.LessOrEqual(t, most, maxSpread*mean, "P = %d: the cut's slowest stage", p)
		} else { // none does: the best cut there is
			require.Equal(t, optimum(p), most, "P = %d: the cut's slowest stage", p)
		}
		layers := append(append([]int{0}, a.fineCuts()...), n)
		for l := 0; l+1 < len(layers); l++ {
			if layers[l] <= heavy && heavy < layers[l+1] {
				require.Equal(t, describeOp(a.seq[layers[l]]), bal.Heaviest, "the layer holding the heavy op")
				require.InDelta(t, float64(layers[l+1]-layers[l]-1+n)/float64(2*n-1), bal.Share, 1e-9)
			}
		}
		require.Greater(t, bal.Share, 1/float64(p), "the heavy layer is more than a fair share")
		require.True(t, bal.Balanced(p))
	}
}

// mlpAnalysis is the analysis of a small float64 MLP, as Split makes it.
func mlpAnalysis(t *testing.T) *analysis {
	m, err := testmodels.MLP(tensor.Float64, 4, 2)
	require.NoError(t, err)
	a, err := analyze(m.Graph, m.Cost, m.Learnables)
	require.NoError(t, err)
	return a
}

// measuredAs is a Profiled measurement in which op q of a's current
// assignment takes truth[q] ms, all of it counted as its stage's forward.
func measuredAs(a *analysis, truth []float64) func(*Plan) ([]StageTime, error) {
	return func(p *Plan) ([]StageTime, error) {
		times := make([]StageTime, len(p.Stages))
		for q := range a.seq {
			times[a.stageAt[q]].Forward += time.Duration(truth[q] * float64(time.Millisecond))
		}
		return times, nil
	}
}

func TestBalanceMinimisesTheLargestStage(t *testing.T) {
	blocks := []float64{1, 1, 1, 1, 8, 1, 1, 1, 1}
	require.Equal(t, []int{4, 5}, balance(blocks, 3))
	// Exactly p groups even when fewer would do.
	require.Len(t, balance([]float64{1, 1, 1, 1}, 4), 3)
	// Brute force on small random cases.
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.Intn(8)
		blocks := randomCosts(rng, n, 20)
		p := 1 + rng.Intn(n)
		got := maxGroup(blocks, balance(blocks, p))
		require.Len(t, balance(blocks, p), p-1)
		require.InDelta(t, bruteForce(blocks, p), got, 1e-9, "blocks %v p %d", blocks, p)
	}
}

func maxGroup(blocks []float64, cuts []int) float64 {
	bounds := append(append([]int{0}, cuts...), len(blocks))
	best := 0.0
	for g := 0; g+1 < len(bounds); g++ {
		s := 0.0
		for _, b := range blocks[bounds[g]:bounds[g+1]] {
			s += b
		}
		if s > best {
			best = s
		}
	}
	return best
}

func bruteForce(blocks []float64, p int) float64 {
	best := math.Inf(1)
	everyCut(len(blocks), p-1, func(cuts []int) { best = min(best, maxGroup(blocks, cuts)) })
	return best
}

// TestPlanAvoidsReshapeAliasing is gorgonia's reshape-aliasing bug in its
// smallest form: y = softmax(x·w); z = reshape(reshape(y)) + y. Gorgonia's
// reshape returns a view, the tape machine runs the add in place on it and
// overwrites y, which the softmax's backward reads: the whole graph's
// gradient is wrong. Stages use a copying reshape, so every plan matches
// finite differences (and the whole graph does not).
func TestPlanAvoidsReshapeAliasing(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 2), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{0.3, -1, 2, 0.5, -0.2, 1.1}))))
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 4), G.WithName("w"),
		G.WithValue(tensor.New(tensor.WithShape(2, 4), tensor.WithBacking([]float64{0.1, -0.3, 0.8, 0.2, -0.5, 0.4, 0.05, 0.9}))))
	y := G.Must(G.SoftMax(G.Must(G.Mul(x, w))))
	z := G.Must(G.Add(G.Must(G.Reshape(G.Must(G.Reshape(y, tensor.Shape{12})), tensor.Shape{3, 4})), y))
	cost := G.Must(G.Mean(G.Must(G.Square(z))))
	feeds := map[*G.Node]G.Value{x: x.Value()}

	a, err := analyze(g, cost, G.Nodes{w})
	require.NoError(t, err)
	costAt := func() float64 {
		in, err := newInterpreter(a, feeds)
		require.NoError(t, err)
		v, err := in.eval(cost)
		require.NoError(t, err)
		return v.Data().(float64)
	}
	wd := w.Value().Data().([]float64)
	fd := make([]float64, len(wd))
	for j := range wd {
		orig := wd[j]
		wd[j] = orig + 1e-6
		up := costAt()
		wd[j] = orig - 1e-6
		down := costAt()
		wd[j] = orig
		fd[j] = (up - down) / 2e-6
	}
	want := tensor.New(tensor.WithShape(2, 4), tensor.WithBacking(fd))
	for p := 1; p <= len(a.seq); p++ {
		plan, err := Split(g, cost, G.Nodes{w}, Stages(p))
		require.NoError(t, err)
		_, grads, err := stagewise(plan, feeds)
		require.NoError(t, err)
		require.Less(t, absErr(t, grads[0], want), 1e-8, "P=%d", p)
	}
	_, whole, err := reference(g, cost, G.Nodes{w}, feeds)
	require.NoError(t, err)
	require.Greater(t, absErr(t, whole[0], want), 1e-3, "gorgonia's whole graph got it right: the bug this guards against is fixed upstream")
}

// TestTensorConstantsAreReplicated: a constant tensor (positional encodings,
// masks) is rebuilt in every stage that reads it, like scalar constants.
func TestTensorConstantsAreReplicated(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("x"))
	w1 := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("w1"), G.WithInit(G.GlorotU(1)))
	w2 := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("w2"), G.WithInit(G.GlorotU(1)))
	c := G.NewConstant(tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6})), G.WithName("c"))
	h := G.Must(G.Add(G.Must(G.Mul(x, w1)), c))
	cost := G.Must(G.Mean(G.Must(G.Add(G.Must(G.Mul(h, w2)), c))))
	plan, err := Split(g, cost, G.Nodes{w1, w2}, FineGrained())
	require.NoError(t, err)
	require.Len(t, plan.Stages, 2)
	for _, st := range plan.Stages {
		for _, in := range st.Inputs {
			require.NotEqual(t, "c", in.Name, "a constant is never a stage input")
		}
	}
	feeds := map[*G.Node]G.Value{x: tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}))}
	wantCost, wantGrads, err := reference(g, cost, G.Nodes{w1, w2}, feeds)
	require.NoError(t, err)
	require.NoError(t, checkParity(t, plan, feeds, wantCost, wantGrads))
}

// TestNudgeCutsBetweenAnIm2colAndItsProduct: at layer boundaries a
// convolution's layer may also start at its product, not only at its
// im2col: where the two cost most run together (a fused kernel, whose
// time falls on the im2col) and the stage holding them is the slowest,
// nudge moves the cut between them when that makes the stages even;
// unless the stages talk over a network (OverNetwork).
func TestNudgeCutsBetweenAnIm2colAndItsProduct(t *testing.T) {
	m, err := testmodels.CNN(tensor.Float64, 4, 2)
	require.NoError(t, err)
	a, err := analyze(m.Graph, m.Cost, m.Learnables)
	require.NoError(t, err)
	fine := a.fineCuts()
	at := a.atIm2col(fine)
	layer := slices.IndexFunc(at, func(c int) bool { return a.patchesOp(c) && !slices.Contains(fine, c) })
	require.GreaterOrEqual(t, layer, 0, "a convolution whose layer starts at its im2col")
	im2col, product := at[layer], fine[layer]
	n := len(a.seq)
	measure := func(p *Plan) ([]StageTime, error) { // the conv's work is one kernel when its ops share a stage
		times := make([]StageTime, len(p.Stages))
		for q := range a.seq {
			ms := 1.0
			switch {
			case q >= im2col && q < product && a.stageAt[q] == a.stageAt[product]:
				ms = 0
			case q == product && a.stageAt[im2col] == a.stageAt[product]:
				ms = float64(n)
			case q == product:
				ms = float64(n) / 2
			case q >= im2col && q < product:
				ms = float64(n)/2/float64(product-im2col) + 1
			}
			times[a.stageAt[q]].Forward += time.Duration(ms * float64(time.Millisecond))
		}
		return times, nil
	}
	cfg := config{stages: 2, setStages: true, fine: true}
	a.assign([]int{im2col})
	times, err := measure(&Plan{Stages: make([]*Stage, 2)})
	require.NoError(t, err)
	before := cfg.measured(times)
	cuts, bal, err := nudge(a, &cfg, make([]float64, n), []int{im2col}, before, measure)
	require.NoError(t, err)
	require.Equal(t, []int{product}, cuts, "between the im2col and its product")
	require.Less(t, cfg.heaviest(bal.Times), cfg.heaviest(before.Times))

	cfg.network = true // over a network the patches' bytes cost more than the balance wins
	cuts, _, err = nudge(a, &cfg, make([]float64, n), []int{im2col}, before, measure)
	require.NoError(t, err)
	require.Equal(t, []int{im2col}, cuts, "OverNetwork: the layer starts at its im2col")
}
