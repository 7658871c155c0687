package zoo

import (
	"context"
	"fmt"
	"math/rand"
	"time"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/delay"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/rescheduler"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/solvers"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// Config is one training run.
type Config struct {
	// Schedule is the pipeline schedule (default PipeMare).
	Schedule schedule.Schedule
	// Stages is P; 0 cuts one stage per layer (fine grain).
	Stages int
	// Microbatch is the rows of one microbatch (the model's batch size);
	// Microbatches is N.
	Microbatch, Microbatches int
	Epochs                   int
	// LR is the base learning rate of the Momentum solver, cosine-annealed
	// to LR/100 over the run when Cosine is set; Momentum its β (default
	// 0.9; set NoMomentum for plain SGD).
	LR         float64
	Cosine     bool
	Momentum   float64
	NoMomentum bool
	// T1 is PipeMare's learning-rate rescheduling length K in asynchronous
	// steps (a synchronous warm-up does not count; 0: off); T2 its
	// discrepancy correction γ (0: off).
	T1 int
	T2 float64
	// Warmup trains the first steps with 1F1B-flush (T3).
	Warmup int
	// Activations is what stages keep between forward and backward.
	Activations asyncvm.Activations
	Seed        int64
	// Delays, when set, trains with injected delays (asyncvm.Injected)
	// instead of running the pipeline.
	Delays delay.Source
	// Progress, when set, is called after every epoch.
	Progress func(EpochResult)
	// Steps, when set, is called every ProgressEvery steps within an epoch
	// with the steps done so far (for progress bars).
	Steps         func(done, total int)
	ProgressEvery int
}

// EpochResult is what one epoch measured.
type EpochResult struct {
	Epoch    int     `json:"epoch"`
	Loss     float64 `json:"loss"`
	Accuracy float64 `json:"test_accuracy"`
	// Wall is the epoch's training time (evaluation excluded).
	Wall          time.Duration `json:"wall_ns"`
	SamplesPerSec float64       `json:"samples_per_sec"`
	// Utilization is the pipeline's measured utilization over the run so
	// far (asyncvm.Report.Utilization; 0 with injected delays).
	Utilization float64 `json:"utilization"`
	// Losses are the minibatch losses of the epoch.
	Losses []float64 `json:"losses"`
}

// Result is a whole run.
type Result struct {
	Config Config         `json:"-"`
	Model  string         `json:"model"`
	Stages int            `json:"stages"`
	Epochs []EpochResult  `json:"epochs"`
	Report asyncvm.Report `json:"report"`
	// Virtual is the run replayed on one virtual device per stage (none
	// with injected delays).
	Virtual  schedule.Virtual  `json:"virtual_devices"`
	Events   [][]asyncvm.Event `json:"-"`
	Plan     *graphsplit.Plan  `json:"-"`
	Wall     time.Duration     `json:"wall_ns"`
	Accuracy float64           `json:"final_accuracy"`
}

// StepsAfterWarmup is the number of asynchronous steps of a run with
// stepsPerEpoch minibatches an epoch (at least 1): T1's natural length.
func (c Config) StepsAfterWarmup(stepsPerEpoch int) int {
	return max(1, c.Epochs*stepsPerEpoch-c.Warmup)
}

// beta is the momentum in use: Momentum, 0.9 by default, 0 with NoMomentum.
func (c Config) beta() float64 {
	if c.NoMomentum {
		return 0
	}
	if c.Momentum == 0 {
		return 0.9
	}
	return c.Momentum
}

// SolverName names the solver: "Momentum(β)" or "SGD".
func (c Config) SolverName() string {
	if b := c.beta(); b > 0 {
		return fmt.Sprintf("Momentum(%g)", b)
	}
	return "SGD"
}

// Solver returns the per-stage solver Config describes: Momentum(β), or
// SGD without momentum (package solvers: gorgonia's, bit for bit, with a
// state that can be saved), wrapped in T2's correction and T1's
// rescheduler (rescheduler.PipeMare).
func (c Config) Solver(stepsPerEpoch int) func(stage int) (gorgonia.Solver, error) {
	return func(stage int) (gorgonia.Solver, error) {
		var s gorgonia.Solver
		var err error
		if b := c.beta(); b > 0 {
			s, err = solvers.NewMomentum(solvers.WithLearnRate(c.LR), solvers.WithMomentum(b))
		} else {
			s, err = solvers.NewSGD(solvers.WithLearnRate(c.LR))
		}
		if err != nil {
			return nil, errors.Wrap(err, "zoo")
		}
		base := rescheduler.Constant(c.LR)
		if c.Cosine {
			base = rescheduler.Cosine(c.LR, c.LR/100, stepsPerEpoch*c.Epochs)
		}
		return rescheduler.PipeMare(s, base, c.T1, c.T2)
	}
}

// Train builds a fresh model with build, trains it on train for cfg.Epochs
// with the pipeline (or with injected delays) and measures test accuracy
// after every epoch.
func Train(ctx context.Context, build Builder, train, test Data, cfg Config) (*Result, error) {
	if cfg.Schedule.Actions == nil {
		cfg.Schedule = schedule.PipeMare
	}
	if cfg.Microbatch <= 0 || cfg.Microbatches <= 0 || cfg.Epochs <= 0 || cfg.LR <= 0 {
		return nil, errors.Errorf("zoo: microbatch %d, microbatches %d, epochs %d and learning rate %g must be positive", cfg.Microbatch, cfg.Microbatches, cfg.Epochs, cfg.LR)
	}
	if cfg.T2 < 0 || cfg.T2 >= 1 {
		return nil, errors.Errorf("zoo: T2 γ = %g must be in [0, 1)", cfg.T2)
	}
	m, err := build(cfg.Microbatch, cfg.Seed)
	if err != nil {
		return nil, err
	}
	opts := []graphsplit.Option{graphsplit.FineGrained()}
	if cfg.Stages > 0 {
		opts = append(opts, graphsplit.Stages(cfg.Stages))
	}
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, opts...)
	if err != nil {
		return nil, err
	}
	eval, err := NewEvaluator(m)
	if err != nil {
		return nil, err
	}
	defer eval.Close()
	stepsPerEpoch := train.Len() / (cfg.Microbatch * cfg.Microbatches)
	common := []asyncvm.Option{
		asyncvm.WithMicrobatches(cfg.Microbatches), asyncvm.WithSolverFactory(cfg.Solver(stepsPerEpoch)), asyncvm.WithSeed(cfg.Seed),
	}
	var vm *asyncvm.VM
	if cfg.Delays != nil {
		if cfg.Warmup > 0 {
			return nil, errors.Errorf("zoo: injected delays start at the first step; a warm-up of %d steps cannot be combined with them", cfg.Warmup)
		}
		vm, err = asyncvm.NewInjected(plan, cfg.Delays, common...)
	} else {
		opts := append(common, asyncvm.WithSchedule(cfg.Schedule), asyncvm.WithActivations(cfg.Activations))
		if cfg.Warmup > 0 {
			opts = append(opts, asyncvm.WithWarmup(cfg.Warmup, schedule.OneFOneB))
		}
		vm, err = asyncvm.New(plan, opts...)
	}
	if err != nil {
		return nil, err
	}
	defer vm.Close()

	res := &Result{Config: cfg, Model: m.Name, Stages: len(plan.Stages), Plan: plan}
	start := time.Now()
	// Whatever happens, the result holds what ran.
	defer func() {
		res.Wall = time.Since(start)
		res.Report = vm.Report()
		if cfg.Delays == nil {
			res.Events = vm.Events()
			res.Virtual = vm.Replay()
		}
		if len(res.Epochs) > 0 {
			res.Accuracy = res.Epochs[len(res.Epochs)-1].Accuracy
		}
	}()
	rng := rand.New(rand.NewSource(cfg.Seed))
	every := max(cfg.ProgressEvery, 1)
	for epoch := 1; epoch <= cfg.Epochs; epoch++ {
		batches := Minibatches(train, m, cfg.Microbatches, rng)
		er := EpochResult{Epoch: epoch}
		began := time.Now()
		for done := 0; done < len(batches); {
			chunk := batches[done:min(done+every, len(batches))]
			losses, err := vm.Run(ctx, chunk)
			if err != nil { // keep what ran of the epoch, without accuracy
				er.Wall = time.Since(began)
				res.Epochs = append(res.Epochs, er)
				return res, err
			}
			er.Losses = append(er.Losses, losses...)
			done += len(chunk)
			if cfg.Steps != nil {
				cfg.Steps(done, len(batches))
			}
		}
		er.Wall = time.Since(began)
		for _, l := range er.Losses {
			er.Loss += l / float64(len(er.Losses))
		}
		er.SamplesPerSec = float64(len(batches)*cfg.Microbatch*cfg.Microbatches) / er.Wall.Seconds()
		if cfg.Delays == nil {
			er.Utilization = vm.Report().Utilization
		}
		if err := vm.Pull(ctx); err != nil { // stages elsewhere hold the weights
			return res, err
		}
		if er.Accuracy, err = eval.Accuracy(test); err != nil {
			return res, err
		}
		res.Epochs = append(res.Epochs, er)
		if cfg.Progress != nil {
			cfg.Progress(er)
		}
	}
	if err := vm.Flush(ctx); err != nil {
		return res, err
	}
	return res, nil
}
