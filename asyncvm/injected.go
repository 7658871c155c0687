package asyncvm

import (
	"context"
	"math"
	"math/rand"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Delays says how many updates old the weights are that a stage's forward
// of a microbatch reads, in delay-injection training (Injected).
type Delays interface {
	// Delay is called once per stage and microbatch, in increasing
	// microbatch order per stage.
	Delay(stage, micro int) int
	// Mean is the expected delay of a stage (what a rescheduling solver is
	// told before the first step).
	Mean(stage int) float64
	// Max bounds the stage's delays: how many past weight versions the
	// trainer keeps.
	Max(stage int) int
}

// FixedDelays gives stage i the delay taus[i] for every microbatch.
type FixedDelays []int

// Delay returns taus[stage].
func (f FixedDelays) Delay(stage, _ int) int { return f[stage] }

// Mean returns taus[stage].
func (f FixedDelays) Mean(stage int) float64 { return float64(f[stage]) }

// Max returns taus[stage].
func (f FixedDelays) Max(stage int) int { return f[stage] }

// PipeMareDelays are the delays of a PipeMare pipeline with p stages and n
// microbatches per minibatch: τ_i = ceil((2(p−1−i)+1)/n) for every forward.
func PipeMareDelays(p, n int) FixedDelays {
	out := make(FixedDelays, p)
	for i := range out {
		out[i] = Delay(p, n, i)
	}
	return out
}

// RecordedDelays replays the delays a real run recorded
// (VM.DelayLog with WithDelayLog): [stage][microbatch].
type RecordedDelays [][]int

// Delay returns the recorded delay (0 past the end of the record).
func (r RecordedDelays) Delay(stage, micro int) int {
	if micro < len(r[stage]) && r[stage][micro] >= 0 {
		return r[stage][micro]
	}
	return 0
}

// Max returns the largest recorded delay of the stage.
func (r RecordedDelays) Max(stage int) int {
	m := 0
	for _, d := range r[stage] {
		m = max(m, d)
	}
	return m
}

// Mean returns the mean recorded delay of the stage.
func (r RecordedDelays) Mean(stage int) float64 {
	sum, n := 0, 0
	for _, d := range r[stage] {
		if d >= 0 {
			sum += d
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// ExponentialDelays draws, per stage and optimizer step, one delay for all
// the forwards of that step: round(X) with X exponential of mean MeanDelay,
// redrawn while above Limit (a truncated exponential, as in the PipeMare
// paper's Hogwild-style experiment). Draws depend only on Seed, the stage
// and the step.
type ExponentialDelays struct {
	MeanDelay float64
	Limit     int
	Seed      int64
	// N is the microbatches per minibatch (a step's forwards share a draw).
	N int
}

// Delay draws the delay of micro's step at stage.
func (e ExponentialDelays) Delay(stage, micro int) int {
	n := max(e.N, 1)
	rng := rand.New(rand.NewSource(e.Seed*1_000_003 + int64(stage)*7_919 + int64(micro/n)))
	if e.MeanDelay <= 0 {
		return 0
	}
	for {
		x := rng.ExpFloat64() * e.MeanDelay
		if d := int(math.Round(x)); d <= e.Limit {
			return d
		}
	}
}

// Mean is MeanDelay.
func (e ExponentialDelays) Mean(int) float64 { return e.MeanDelay }

// Max is Limit, the truncation.
func (e ExponentialDelays) Max(int) int { return e.Limit }

// Injected trains a plan with injected delays instead of running a
// pipeline: one goroutine runs every microbatch forward through the stages
// and back, each stage's forward reading the weights of Delays updates ago
// (kept in a ring of past versions), its backward the current weights — or
// the weights a BackwardWeighter solver supplies — exactly as the PipeMare
// schedule does. It studies T1 and T2 at any P without P workers, with any
// delay distribution, reproducibly. Fed the delays a real PipeMare run
// recorded, it reproduces that run's weights bit for bit.
//
// It uses the VM's options WithMicrobatches, WithSolver, WithSeed,
// WithDropoutMask and WithDiscrepancy; activations are recomputed.
type Injected struct {
	feeder // the plan, N and the options' data settings
	cfg    config
	delays Delays
	stages []*injStage
	step   int
	closed bool
}

type injStage struct {
	st      *graphsplit.Stage
	solver  gorgonia.Solver
	params  []gorgonia.Value
	acc     []*tensor.Dense
	model   []gorgonia.ValueGrad
	bns     []*gorgonia.BatchNormOp
	ring    [][]gorgonia.Value // ring[v % len]: weights of version v
	version int
	stats   stageStats
}

// NewInjected prepares delay-injection training of plan.
func NewInjected(plan *graphsplit.Plan, delays Delays, opts ...Option) (*Injected, error) {
	if plan == nil || len(plan.Stages) == 0 {
		return nil, errors.New("asyncvm: plan has no stages")
	}
	if err := refuseShared(plan); err != nil {
		return nil, err
	}
	if delays == nil {
		return nil, errors.New("asyncvm: NewInjected: no delays")
	}
	cfg := config{n: 1, seed: 1}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.n < 1 {
		return nil, errors.Errorf("asyncvm: WithMicrobatches(%d): need at least one microbatch per minibatch", cfg.n)
	}
	if cfg.solver == nil {
		cfg.solver = func(int) gorgonia.Solver { return gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.01)) }
	}
	x := &Injected{cfg: cfg, delays: delays}
	restore := keepBatchNormStats(plan)
	defer restore()
	x.feeder = feeder{plan: plan, n: cfg.n, cfg: &x.cfg}
	for _, st := range plan.Stages {
		s := &injStage{st: st, solver: cfg.solver(st.Index)}
		if s.solver == nil {
			return nil, errors.Errorf("asyncvm: stage %d: the solver factory returned nil", st.Index)
		}
		s.stats.delays, s.stats.bwdLag = map[int]int{}, map[int]int{}
		for _, l := range st.Learnables {
			acc := tensorutil.Zeros(l.Dtype(), l.Shape().Clone())
			s.params = append(s.params, l.Value())
			s.acc = append(s.acc, acc)
			s.model = append(s.model, &valueGrad{name: l.Name(), value: l.Value(), grad: acc})
		}
		s.bns = batchNorms(st)
		if err := st.Forward.Compile(); err != nil {
			return nil, err
		}
		if err := st.Train.Compile(); err != nil {
			return nil, err
		}
		if delays.Max(st.Index) < 0 {
			return nil, errors.Errorf("asyncvm: stage %d: negative maximum delay", st.Index)
		}
		s.ring = make([][]gorgonia.Value, delays.Max(st.Index)+1)
		if da, ok := s.solver.(DelayAware); ok {
			da.SetDelay(max(1, delays.Mean(st.Index)), false)
		}
		x.stages = append(x.stages, s)
	}
	return x, nil
}

// weights returns stage s's weights of version v: nil for the current
// version (the live tensors), else the copy in the ring.
func (s *injStage) weights(v int) []gorgonia.Value {
	if v >= s.version {
		return nil
	}
	return s.ring[v%len(s.ring)]
}

// remember copies the current weights into the ring as version s.version.
func (s *injStage) remember() error {
	slot := s.version % len(s.ring)
	if s.ring[slot] == nil {
		s.ring[slot] = make([]gorgonia.Value, len(s.params))
	}
	for i, p := range s.params {
		if s.ring[slot][i] == nil {
			c, err := tensorutil.Clone(p)
			if err != nil {
				return err
			}
			s.ring[slot][i] = c
			continue
		}
		if err := tensorutil.CopyInto(s.ring[slot][i].(tensor.Tensor), p); err != nil {
			return err
		}
	}
	return nil
}

// Step trains on one minibatch (the VM's Step contract) and returns its mean
// loss.
func (x *Injected) Step(ctx context.Context, feeds map[*gorgonia.Node]gorgonia.Value) (float64, error) {
	if x.closed {
		return 0, errors.New("asyncvm: Injected is closed")
	}
	micro, err := x.sliceFeeds(feeds, x.step)
	if err != nil {
		return 0, errors.Wrapf(err, "asyncvm: minibatch %d", x.step)
	}
	k := x.step
	delay := make([][]int, len(x.stages))
	for i, s := range x.stages {
		for j := 0; j < x.n; j++ {
			d := x.delays.Delay(i, k*x.n+j)
			if d < 0 || d > x.delays.Max(i) {
				return 0, errors.Errorf("asyncvm: stage %d microbatch %d: delay %d outside [0, %d]", i, k*x.n+j, d, x.delays.Max(i))
			}
			delay[i] = append(delay[i], min(d, k)) // nothing older than the start
		}
		if len(s.ring) > 1 {
			if err := s.remember(); err != nil {
				return 0, err
			}
		}
	}
	loss := 0.0
	for j := 0; j < x.n; j++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		l, err := x.microbatch(k*x.n+j, micro[j], delay)
		if err != nil {
			return 0, err
		}
		loss += l
	}
	for _, s := range x.stages {
		a := Action{Op: Update, Step: k}
		if err := s.solver.Step(s.model); err != nil {
			return 0, &StageError{Stage: s.st.Index, Action: a, Minibatch: k, Err: errors.Wrap(err, "solver")}
		}
		for i, p := range s.params {
			if !tensorutil.Finite(p) {
				return 0, &StageError{Stage: s.st.Index, Action: a, Minibatch: k, Err: errors.Errorf("learnable %q is not finite after the update; lower the learning rate", s.st.Learnables[i].Name())}
			}
		}
		for _, acc := range s.acc {
			acc.Zero()
		}
		s.version++
		sum := 0
		for _, d := range delay[s.st.Index] {
			s.stats.delays[d]++
			sum += d
		}
		if da, ok := s.solver.(DelayAware); ok {
			da.SetDelay(max(1, float64(sum)/float64(x.n)), true)
		}
	}
	x.step++
	return loss / float64(x.n), nil
}

// microbatch runs microbatch m forward through every stage on delayed
// weights, then backward on current (or corrected) weights.
func (x *Injected) microbatch(m int, feeds []gorgonia.Value, delay [][]int) (float64, error) {
	j := m % x.n
	acts := make(map[int64]gorgonia.Value)
	for fi, f := range x.plan.Feeds {
		acts[f.Key] = feeds[fi]
	}
	inputs := make([][]gorgonia.Value, len(x.stages))
	var loss float64
	for i, s := range x.stages {
		a := F(m)
		fail := func(err error) error {
			return &StageError{Stage: i, Action: a, Minibatch: m / x.n, Err: err}
		}
		in := make([]gorgonia.Value, len(s.st.Inputs))
		for q, p := range s.st.Inputs {
			in[q] = acts[p.Key]
		}
		inputs[i] = in
		old := s.weights(s.version - delay[i][j])
		if err := s.st.Forward.BindLearnables(old); err != nil {
			return 0, fail(err)
		}
		res, err := s.st.Forward.Run(in, nil)
		if old != nil {
			if err2 := s.st.Forward.BindLearnables(nil); err == nil {
				err = err2
			}
		}
		if err != nil {
			return 0, fail(err)
		}
		for q, p := range s.st.Outputs {
			acts[p.Key] = res.Outputs[q]
		}
		if s.st.Last() {
			if !tensorutil.Finite(res.Outputs[0]) {
				return 0, fail(errors.New("the loss is not finite; lower the learning rate, or check the data"))
			}
			if loss, err = tensorutil.Scalar(res.Outputs[0]); err != nil {
				return 0, fail(err)
			}
		}
	}
	// Backward, last stage first; gradients of an activation read by
	// several stages are summed in the order of the consuming stages, as
	// the engine does.
	grads := make(map[int64][]gorgonia.Value)
	costGrad, err := tensorutil.ScalarOf(x.plan.Dtype, 1/float64(x.n))
	if err != nil {
		return 0, err
	}
	for i := len(x.stages) - 1; i >= 0; i-- {
		s := x.stages[i]
		a := B(m)
		fail := func(err error) error {
			return &StageError{Stage: i, Action: a, Minibatch: m / x.n, Err: err}
		}
		outGrads := make([]gorgonia.Value, len(s.st.Outputs))
		for q, p := range s.st.Outputs {
			if p.Kind == graphsplit.CostPort {
				outGrads[q] = costGrad
				continue
			}
			if s.st.Train.OutputGrads[q] == nil {
				continue
			}
			var sum gorgonia.Value
			for _, g := range grads[p.Key] { // in consumer order
				if g == nil {
					continue
				}
				var err error
				if sum, err = sumGradient(sum, g); err != nil {
					return 0, fail(err)
				}
			}
			if sum == nil {
				gph := s.st.Train.OutputGrads[q]
				sum = tensorutil.Zeros(gph.Dtype(), gph.Shape())
			}
			outGrads[q] = sum
		}
		d := delay[i][j]
		var bw []gorgonia.Value
		if w, ok := s.solver.(BackwardWeighter); ok {
			if bw, err = w.BackwardWeights(d); err != nil {
				return 0, fail(err)
			}
		}
		if x.cfg.disc && d > 0 {
			read := bw
			if read == nil {
				read = s.params
			}
			s.stats.discSum += relDistance(read, s.weights(s.version-d))
			s.stats.discN++
		}
		if err := s.st.Train.BindLearnables(bw); err != nil {
			return 0, fail(err)
		}
		saved := saveStats(s.bns)
		res, err := s.st.Train.Run(inputs[i], outGrads)
		restoreStats(saved)
		if bw != nil {
			if err2 := s.st.Train.BindLearnables(nil); err == nil {
				err = err2
			}
		}
		if err != nil {
			return 0, fail(err)
		}
		for q, g := range res.LearnableGrads {
			if !tensorutil.Finite(g) {
				return 0, fail(errors.Errorf("gradient of learnable %q is not finite", s.st.Learnables[q].Name()))
			}
			if err := tensorutil.AddInto(s.acc[q], g); err != nil {
				return 0, fail(err)
			}
		}
		for q, p := range s.st.Inputs {
			if p.Kind == graphsplit.Activation {
				grads[p.Key] = append([]gorgonia.Value{res.InputGrads[q]}, grads[p.Key]...)
			}
		}
	}
	return loss, nil
}

// Report gives the delay histograms, the discrepancy (WithDiscrepancy) and
// the memory of the run; timings are not measured.
func (x *Injected) Report() Report {
	r := Report{Schedule: "injected", Stages: len(x.stages), Microbatches: x.n, Minibatches: x.step}
	for i, s := range x.stages {
		sr := StageReport{Stage: i, Delays: copyHist(s.stats.delays), Updates: s.version, Forwards: x.step * x.n, Backwards: x.step * x.n}
		if s.stats.discN > 0 {
			sr.Discrepancy = s.stats.discSum / float64(s.stats.discN)
		}
		n, sum := 0, 0
		for d, c := range sr.Delays {
			n += c
			sum += d * c
		}
		if n > 0 {
			sr.MeanDelay = float64(sum) / float64(n)
		}
		r.PerStage = append(r.PerStage, sr)
	}
	return r
}

// Close releases the plan's compiled programs.
func (x *Injected) Close() error {
	if x.closed {
		return nil
	}
	x.closed = true
	for _, st := range x.plan.Stages {
		st.Forward.Close()
		st.Train.Close()
	}
	return nil
}
