package train

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"math/rand"
	"time"

	"github.com/pipemare/pipemare/zoo"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/delay"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/method"
	"github.com/pipemare/pipemare/rescheduler"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// Config is one training run.
type Config struct {
	// Hyper holds the run's batch, length, base rate, momentum and seed,
	// and whether stages keep their activations (a recipe's Run). LR is
	// the Momentum solver's base rate, cosine-annealed to LR/100 over the
	// run when Cosine is set, divided by 10 at half and again at three
	// quarters of the run when StepDecay is (not both; with neither it is
	// constant); Momentum its β (default 0.9; NoMomentum for plain SGD).
	zoo.Hyper
	StepDecay bool
	// Schedule is the pipeline schedule (default PipeMare).
	Schedule schedule.Schedule
	// Stages is P; 0 cuts one stage per layer (fine grain). Cut, when
	// set, cuts at those op positions instead (graphsplit.CutAtOps: a cut
	// Balanced measured, recorded so that every process of a run and every
	// rerun cuts alike), and Stages is then len(Cut)+1.
	Stages int
	Cut    []int
	// Kernels is the kernel mode the run's float32 matrix products compute
	// in (graphsplit.HoldKernels, held while Train or ServeStage runs);
	// "" is graphsplit.ExactKernels.
	Kernels graphsplit.Kernels
	// T1 is PipeMare's learning-rate rescheduling length K in asynchronous
	// steps (a synchronous warm-up does not count; 0: off); T2 its
	// discrepancy correction γ (0: off).
	T1 int
	T2 float64
	// Spike wraps the momentum solver in spike compensation
	// (correction.NewSpike, D = the delay the schedule gives the stage);
	// it needs momentum.
	Spike bool
	// Predict wraps the solver in linear weight prediction
	// (correction.NewPredictor, γ = 0): the forwards of an asynchronous
	// schedule read w + τ_i·δ. Not with T2, whose backward estimate would
	// undo the prediction, nor with injected delays, whose forwards read
	// recorded versions.
	Predict bool
	// NAdam trains with solvers.NAdam and AsyncPP's hyper-parameters
	// (β1 = 0.99, β2 = 0.999, momentum decay 0.004, decoupled weight decay
	// 0.01, gradients clipped to norm 10) instead of Momentum or SGD, LR
	// its η, on AsyncPP's schedule: a linear warm-up over the first 6% of
	// the steps (their 3 of 50 epochs), then a cosine to LR/10; Cosine,
	// Momentum and NoMomentum are not used.
	NAdam bool
	// Warmup trains the first steps with 1F1B-flush (T3).
	Warmup int
	// Delays, when set, trains with injected delays (asyncvm.NewInjected)
	// instead of running the pipeline.
	Delays delay.Source
	// CheckpointEvery, with CheckpointDir, drains the pipeline every
	// CheckpointEvery steps and writes a checkpoint of the run under
	// CheckpointDir (asyncvm.VM.Checkpoint), keeping the last
	// CheckpointKeep (0: the checkpoint package's default).
	CheckpointEvery int
	CheckpointDir   string
	CheckpointKeep  int
	// Checkpointed, when set, is called after each checkpoint is
	// committed, with the steps it holds and its directory.
	Checkpointed func(step int, dir string)
	// Spec is the run specification the Config was made from (ConfigFor
	// sets it; zero for a Config built otherwise). Checkpoints record it
	// beside the configuration; it changes nothing that trains.
	Spec runspec.Spec
	// Resume, when set, is a checkpoint directory (or a directory with a
	// LATEST pointer) of a run with the same configuration: the run goes on
	// from it, and ends bit-identical to the uninterrupted run.
	Resume string
	// Connect, when set, opens the driver's end of a network transport to
	// stages in other processes (asyncvm.WithEndpoint), each running
	// ServeStage with the same configuration; Train closes the endpoint.
	Connect Connector
	// MaxRestarts, with Connect and checkpoints (CheckpointEvery), is
	// how many times Train restarts a pipeline that failed — a stage
	// process died or stalled, a link broke — from its last checkpoint
	// (Restart): it calls Disconnect, then Connect again, and resumes.
	// Restarts are recorded in Result.Restarts. 0: none.
	MaxRestarts int
	// Disconnect, when set, is called once a failed pipeline's engine is
	// closed, before a restart connects anew, with the failure: it ends
	// what Connect started (the stage processes) and returns how that
	// ended, which the Restart's Reason adds.
	Disconnect func(failure error) error
	// Restarted, when set, is called once a restarted pipeline has
	// resumed, with the restart.
	Restarted func(Restart)
	// Progress, when set, is called after every epoch.
	Progress func(EpochResult)
	// Steps, when set, is called every ProgressEvery steps within an epoch
	// with the steps done so far (for progress bars).
	Steps         func(done, total int)
	ProgressEvery int
}

// EpochResult is what one epoch measured. Its JSON form uses the names in
// the tags; durations are integer nanoseconds.
type EpochResult struct {
	// Epoch counts from 1.
	Epoch int `json:"epoch"`
	// Loss is the mean of Losses.
	Loss float64 `json:"loss"`
	// Accuracy is the test accuracy after the epoch (Evaluator.Accuracy);
	// an interrupted epoch has none (0, and absent from the JSON).
	Accuracy float64 `json:"test_accuracy"`
	// Wall is the epoch's training time (evaluation excluded).
	Wall time.Duration `json:"wall_ns"`
	// Clock is the time from the start of the run's first epoch (in a
	// resumed run: of its first epoch since the resume) to the end of this
	// epoch's evaluation: training, evaluations and all between them, the
	// clock of time to accuracy. An interrupted epoch has none.
	Clock time.Duration `json:"clock_ns,omitempty"`
	// SamplesPerSec is the training samples of the steps that ran over
	// Wall.
	SamplesPerSec float64 `json:"samples_per_sec"`
	// Utilization is the pipeline's measured utilization over the run so
	// far (asyncvm.Report.Utilization; 0 with injected delays).
	Utilization float64 `json:"utilization"`
	// Losses are the minibatch losses of the epoch, one per step that ran.
	Losses []float64 `json:"losses"`
	// Interrupted marks an epoch the run stopped inside (the context was
	// cancelled, or training failed: Train's error says which). Its Loss
	// and SamplesPerSec cover the steps that ran; it has no Accuracy.
	Interrupted bool `json:"interrupted,omitempty"`
}

// MarshalJSON leaves test_accuracy out of an interrupted epoch.
func (e EpochResult) MarshalJSON() ([]byte, error) {
	type plain EpochResult
	out := struct {
		plain
		Accuracy *float64 `json:"test_accuracy,omitempty"`
	}{plain: plain(e)}
	if !e.Interrupted {
		out.Accuracy = &e.Accuracy
	}
	return json.Marshal(out)
}

// Result is a whole run, as far as it went. Its JSON form uses the names
// in the tags; durations are integer nanoseconds.
type Result struct {
	// Config is the run's configuration (not serialised).
	Config Config `json:"-"`
	// zoo.Model is the model's name; Schedule the name of the schedule it ran
	// with (a warm-up shows in Report.Segments).
	Model    string `json:"model"`
	Schedule string `json:"schedule"`
	// Stages is the number of stages of the plan, P.
	Stages int `json:"stages"`
	// Epochs are the epochs that ran (at least one step each), the last
	// one marked Interrupted if the run stopped inside it.
	Epochs []EpochResult `json:"epochs"`
	// Report is what the engine measured.
	Report asyncvm.Report `json:"report"`
	// Virtual is the run replayed on one virtual device per stage (none,
	// and absent from the JSON, with injected delays).
	Virtual schedule.Virtual  `json:"virtual_devices,omitzero"`
	Events  [][]asyncvm.Event `json:"-"`
	Plan    *graphsplit.Plan  `json:"-"`
	// Wall is the run's time, evaluation included; Evaluation the part of
	// it spent measuring test accuracy (after each epoch, and the final
	// model's), which the engine's utilization leaves out
	// (asyncvm.Report.Utilization), as it leaves out writing checkpoints.
	Wall       time.Duration `json:"wall_ns"`
	Evaluation time.Duration `json:"evaluation_ns"`
	// Accuracy (final_accuracy) is the test accuracy after the last
	// complete epoch, its Epochs' Accuracy (0, and absent from the JSON, if
	// none completed); the accuracy of the model the run ends with is
	// ModelAccuracy.
	Accuracy float64 `json:"final_accuracy"`
	// Interrupted is set when the run stopped before it finished: before
	// its last epoch ended, or in its final flush and measurement.
	Interrupted bool `json:"interrupted,omitempty"`
	// WeightsSHA256 is graphsplit.Plan.WeightsSHA256 of the trained
	// weights: two runs with the same hash trained bit-identical weights.
	// It is set when the run finished (and its pipeline flushed), and when
	// its context stopped it and the pipeline drained (Interrupted: the
	// weights of the steps that ran).
	WeightsSHA256 string `json:"weights_sha256,omitempty"`
	// Restarts are the restarts of the run's pipeline (Config.MaxRestarts),
	// in order; absent when none. Report, Events, Virtual and Wall cover
	// the run since the last one.
	Restarts []Restart `json:"restarts,omitempty"`
	// ModelAccuracy (model_test_accuracy) is the test accuracy of those
	// weights, the model the run ends with and writes (model.safetensors,
	// which pipemare eval measures alike); it is set, like WeightsSHA256,
	// when the run finished. An
	// asynchronous schedule's last epoch measured Accuracy with its last
	// updates still in flight; the final flush applies them, so the two
	// differ. A synchronous schedule flushes at every step: the two are
	// equal.
	ModelAccuracy float64 `json:"model_test_accuracy,omitempty"`
}

// MarshalJSON leaves final_accuracy out when no epoch completed.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	out := struct {
		plain
		Accuracy *float64 `json:"final_accuracy,omitempty"`
	}{plain: plain(r)}
	for _, e := range r.Epochs {
		if !e.Interrupted {
			out.Accuracy = &r.Accuracy
		}
	}
	return json.Marshal(out)
}

// Steps is the minibatches the run trained, in the epochs of r: one
// loss each. An interrupted run's weights (WeightsSHA256) hold these
// steps, and no other.
func (r *Result) Steps() int {
	n := 0
	for _, e := range r.Epochs {
		n += len(e.Losses)
	}
	return n
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

// SolverName names the solver: "Momentum(β)", "SGD" or "NAdam".
func (c Config) SolverName() string {
	if c.NAdam {
		return "NAdam"
	}
	if b := c.beta(); b > 0 {
		return fmt.Sprintf("Momentum(%g)", b)
	}
	return "SGD"
}

// nadamWarmup is the fraction of a run AsyncPP's linear warm-up takes (3
// of 50 epochs).
const nadamWarmup = 3.0 / 50

// check refuses the combinations of techniques the solver cannot compose.
func (c Config) check() error {
	if err := predictionWithT2(c, ""); err != nil {
		return err
	}
	switch {
	case c.StepDecay && c.Cosine:
		return errors.New("train: step decay and the cosine are two base schedules; turn one off")
	case c.StepDecay && c.NAdam:
		return errors.New("train: step decay with NAdam, which has AsyncPP's own schedule")
	case c.Spike && c.NAdam:
		return errors.New("train: spike compensation is for a momentum solver, not NAdam")
	case c.Spike && c.beta() == 0:
		return errors.New("train: spike compensation needs momentum, and the run has none (SGD)")
	case c.Predict && c.Schedule.StashWeights:
		return errors.Errorf("train: weight prediction with %s: its stash keeps the weights, not the predicted ones the forwards read", c.Schedule.Name)
	case c.Predict && c.Delays != nil:
		return errors.New("train: weight prediction with injected delays: their forwards read recorded weight versions, not predicted ones")
	}
	return nil
}

// Solver returns the per-stage solver factory of the run: c's method value
// (Method) builds each stage's chain, once check has refused the
// combinations c's techniques cannot make.
func (c Config) Solver(stepsPerEpoch int) func(stage int) (gorgonia.Solver, error) {
	m := c.Method(stepsPerEpoch)
	return func(stage int) (gorgonia.Solver, error) {
		if err := c.check(); err != nil {
			return nil, err
		}
		return m.Solver(stage)
	}
}

// Method is the method value c describes for a training set of
// stepsPerEpoch minibatches: c's schedule; Momentum(β), SGD without
// momentum (package solvers: gorgonia's, bit for bit, with a state that
// can be saved) or NAdam; spike compensation, weight prediction and T2
// around it when asked; and T1 over the base schedule (constant, Cosine,
// StepDecay, or NAdam's warm-up and cosine). It judges nothing: check
// does.
func (c Config) Method(stepsPerEpoch int) method.Method {
	total := stepsPerEpoch * c.Epochs
	m := method.For(c.Schedule)
	m.Rate, m.T1 = rescheduler.Constant(c.LR), c.T1
	switch {
	case c.NAdam:
		m.Optimizer = method.NAdam{}
		m.Rate = rescheduler.Warmup(rescheduler.Cosine(c.LR, c.LR/10, total), int(math.Round(nadamWarmup*float64(total))))
	case c.beta() > 0:
		m.Optimizer = method.Momentum{Beta: c.beta()}
	default:
		m.Optimizer = method.SGD{}
	}
	if c.Cosine && !c.NAdam {
		m.Rate = rescheduler.Cosine(c.LR, c.LR/100, total)
	}
	if c.StepDecay {
		m.Rate = rescheduler.Milestones(rescheduler.Constant(c.LR), 0.1, total/2, total*3/4)
	}
	if c.Spike {
		m.Techniques = append(m.Techniques, method.Spike{})
	}
	if c.Predict {
		m.Techniques = append(m.Techniques, method.Predict{})
	}
	if c.T2 != 0 {
		m.Techniques = append(m.Techniques, method.T2{Gamma: c.T2})
	}
	return m
}

// Train builds a fresh model with build, trains it on train for cfg.Epochs
// with the pipeline (or with injected delays) and measures test accuracy
// after every epoch. Once ctx is done it reads no further minibatch and
// finishes, within InterruptGrace, what was read: it trains the
// minibatches already handed out, ends an epoch all of whose steps ran
// (its accuracy, its checkpoint) and a run all of whose epochs ran (which
// then returns no error); else it drains the pipeline and returns ctx's
// error with the result so far — every step that ran and no other: its
// last epoch Interrupted if the run stopped inside it, an epoch that had
// not begun absent — and the drained weights' WeightsSHA256.
// With cfg.MaxRestarts it restarts a pipeline that failed from its last
// checkpoint (Restart). It computes with graphsplit.UseFastBLAS, holding
// cfg.Kernels (graphsplit.HoldKernels) until it returns: it refuses to
// start while a run of the process computes in the other mode.
func Train(ctx context.Context, build zoo.Builder, train, test zoo.Data, cfg Config) (*Result, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	release, err := cfg.holdKernels()
	if err != nil {
		return nil, err
	}
	defer release()
	if err := cfg.checkRestarts(); err != nil {
		return nil, err
	}
	return restarting(ctx, cfg, func(a *attempt) (*Result, error) { return trainOnce(ctx, build, train, test, cfg.withResume(a), a) })
}

// trainOnce is one attempt of Train (cfg normalized): from cfg.Resume, or
// from the start; it records in a when its engine was ready and when it
// failed.
func trainOnce(ctx context.Context, build zoo.Builder, train, test zoo.Data, cfg Config, a *attempt) (_ *Result, err error) {
	m, plan, err := cfg.Split(build)
	if err != nil {
		return nil, err
	}
	stepsPerEpoch, err := cfg.stepsPerEpoch(train)
	if err != nil {
		return nil, err
	}
	if cfg.CheckpointEvery < 0 || (cfg.CheckpointEvery > 0) != (cfg.CheckpointDir != "") {
		return nil, errors.Errorf("train: checkpoint every %d steps into %q: give both a positive interval and a directory, or neither", cfg.CheckpointEvery, cfg.CheckpointDir)
	}
	vm, err := cfg.newVM(ctx, plan, cfg.engine(stepsPerEpoch))
	if err != nil {
		return nil, err
	}
	defer vm.Close()
	// ctx stops the run between steps; what was read then finishes — the
	// steps, the pipeline's drain, an epoch all of whose steps ran (its
	// accuracy, its checkpoint) and, once every epoch ran, the run — under
	// runCtx, which ctx cancels only InterruptGrace later.
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	defer context.AfterFunc(ctx, func() { time.AfterFunc(InterruptGrace, cancelRun) })()
	eval := pipelineEvaluator(runCtx, m, vm)

	res := &Result{Config: cfg, Model: m.Name, Schedule: cfg.Schedule.Name, Stages: len(plan.Stages), Plan: plan}
	start := time.Now()
	// Whatever happens, the result holds what ran.
	defer func() { res.record(vm, cfg, start, err) }()
	rc := cfg.savedConfig(m.Name, train.Len())
	firstEpoch, firstIndex := 1, 0
	if cfg.Resume != "" {
		if res.Epochs, firstEpoch, firstIndex, err = resume(ctx, vm, cfg.Resume, rc); err != nil {
			return nil, err
		}
	}
	a.markReady()
	t := &trainer{ctx: runCtx, stop: ctx, cfg: cfg, vm: vm, eval: eval, test: test, rc: rc, res: res}
	rng := rand.New(rand.NewSource(cfg.Seed))
	t.began = time.Now()
	for epoch := 1; epoch <= cfg.Epochs; epoch++ {
		batches := zoo.Minibatches(train, m, cfg.Microbatches, rng) // every epoch draws its order, resumed or not
		if epoch < firstEpoch {
			continue
		}
		from := 0
		if epoch == firstEpoch {
			from = firstIndex
		}
		if err := t.epoch(epoch, batches, from); err != nil {
			a.failed = time.Now()
			if ctx.Err() != nil {
				t.drain(plan)
			}
			return res, err
		}
	}
	if err := t.finish(plan); err != nil {
		a.failed = time.Now()
		return res, err
	}
	return res, nil
}

// newVM builds the engine that trains plan with opts: with injected
// delays (cfg.Delays), driving stages in other processes (cfg.Connect; the
// endpoint is closed if the engine cannot be built), or in this process.
// It refuses injected delays with Connect or with a warm-up.
func (cfg Config) newVM(ctx context.Context, plan *graphsplit.Plan, opts []asyncvm.Option) (*asyncvm.VM, error) {
	switch {
	case cfg.Delays != nil && cfg.Connect != nil:
		return nil, errors.New("train: injected delays train in one process; they cannot drive stages elsewhere (Connect)")
	case cfg.Delays != nil && cfg.Warmup > 0:
		return nil, errors.Errorf("train: injected delays start at the first step; a warm-up of %d steps cannot be combined with them", cfg.Warmup)
	case cfg.Delays != nil:
		return asyncvm.NewInjected(plan, cfg.Delays, opts...)
	case cfg.Connect != nil:
		ep, err := cfg.Connect(ctx, plan)
		if err != nil {
			return nil, err
		}
		vm, err := asyncvm.New(plan, append(opts, asyncvm.WithEndpoint(ep))...)
		if err != nil {
			_ = ep.Close()
		}
		return vm, err
	default:
		return asyncvm.New(plan, opts...)
	}
}

// record fills in r what ran, whatever happened, when Train returns with
// err: the run's time since start, the engine's report, its events and
// their replay (not with injected delays), the accuracy of the last
// complete epoch, and whether the run stopped before it finished — before
// its last epoch ended, or, with err, before its final flush and
// measurement did.
func (r *Result) record(vm *asyncvm.VM, cfg Config, start time.Time, err error) {
	r.Wall = time.Since(start)
	r.Report = vm.Report()
	if cfg.Delays == nil {
		r.Events = vm.Events()
		r.Virtual = vm.Replay()
	}
	for _, e := range r.Epochs {
		if !e.Interrupted {
			r.Accuracy = e.Accuracy
		}
	}
	r.Interrupted = err != nil || len(r.Epochs) < cfg.Epochs || r.Epochs[len(r.Epochs)-1].Interrupted
}

// resume restores vm from the checkpoint at (or that LATEST points to in)
// dir, which must hold a run of configuration rc, and returns the epochs it
// recorded and where the run goes on: the epoch (from 1) and the minibatch
// within it (from 0).
func resume(ctx context.Context, vm *asyncvm.VM, dir string, rc savedConfig) (epochs []EpochResult, epoch, index int, err error) {
	if dir, err = checkpointDir(dir); err != nil {
		return nil, 0, 0, err
	}
	man, err := vm.Resume(ctx, dir)
	if err != nil {
		return nil, 0, 0, err
	}
	return resumed(man, rc)
}

// trainer is the state of a run of Train once its engine is built: what
// each epoch needs, and the result so far.
type trainer struct {
	ctx  context.Context // the engine's
	stop context.Context // Train's: no step is read once it is done
	cfg  Config
	vm   *asyncvm.VM
	eval *Evaluator
	test zoo.Data
	rc   savedConfig // the run's configuration, for its checkpoints
	res  *Result
	// began is when the first epoch of this call began (EpochResult.Clock).
	began time.Time
}

// epoch trains epoch on its minibatches batches, from minibatch from on:
// a run resumed from a checkpoint inside the epoch (from > 0) goes on
// with the epoch's result so far, the last of res.Epochs, which the
// epoch's result replaces. It appends the epoch's result to res.Epochs:
// complete once its accuracy is measured; interrupted, without accuracy,
// if it failed or was stopped before — its steps that ran, all of them
// possibly; not at all if none of its steps ran (an epoch that had not
// begun).
func (t *trainer) epoch(epoch int, batches []map[*gorgonia.Node]gorgonia.Value, from int) error {
	er := EpochResult{Epoch: epoch}
	if from > 0 { // a checkpoint inside this epoch
		last := t.res.Epochs[len(t.res.Epochs)-1]
		er, t.res.Epochs = last, t.res.Epochs[:len(t.res.Epochs)-1]
		er.Interrupted = false
	}
	began := time.Now().Add(-er.Wall)
	err := t.stream(epoch, batches, from, &er, began)
	if err == nil {
		err = t.endEpoch(epoch, len(batches), &er, began)
	}
	ended := len(t.res.Epochs) > 0 && t.res.Epochs[len(t.res.Epochs)-1].Epoch == epoch
	if err != nil && !ended && len(er.Losses) > 0 { // keep what ran of the epoch, without accuracy
		er.measure(time.Since(began), t.cfg)
		er.Accuracy, er.Clock, er.Interrupted = 0, 0, true
		t.res.Epochs = append(t.res.Epochs, er)
	}
	return err
}

// stream runs batches[done:] through the pipeline, adding their losses
// to er and calling cfg.Steps as it goes, in streams that end at the
// checkpoints inside the epoch: at each it measures er (the epoch began
// at began) and writes a checkpoint whose last epoch is er marked
// Interrupted.
func (t *trainer) stream(epoch int, batches []map[*gorgonia.Node]gorgonia.Value, done int, er *EpochResult, began time.Time) error {
	cfg := t.cfg
	every := max(cfg.ProgressEvery, 1)
	for done < len(batches) {
		end := len(batches)
		if k := cfg.CheckpointEvery; k > 0 { // streams end at the checkpoints
			step := (epoch-1)*len(batches) + done
			end = min(end, done+k-step%k)
		}
		err := t.vm.Stream(t.ctx, feedsOf(t.stop, batches[done:end]), func(_ int, loss float64) {
			er.Losses = append(er.Losses, loss)
			done++
			if cfg.Steps != nil && (done%every == 0 || done == len(batches)) {
				cfg.Steps(done, len(batches))
			}
		})
		if err != nil {
			return err
		}
		if k, step := cfg.CheckpointEvery, (epoch-1)*len(batches)+done; k > 0 && step%k == 0 && done < len(batches) {
			er.measure(time.Since(began), cfg)
			saved := append(append([]EpochResult(nil), t.res.Epochs...), *er)
			saved[len(saved)-1].Interrupted = true // the rest of the epoch is to come
			if err := saveCheckpoint(t.ctx, t.vm, cfg, t.rc, saved, step, epoch, done); err != nil {
				return err
			}
		}
	}
	return nil
}

// endEpoch ends epoch, of n minibatches, once they all ran: it measures
// er (the epoch began at began), its utilization so far (not with
// injected delays) and its test accuracy, with the weights pulled from
// the stages; appends it to res.Epochs (once all that succeeded); and
// calls cfg.Progress. When a
// checkpoint falls at the epoch's end, it drains the pipeline first and
// writes the checkpoint after the accuracy is measured, so that it holds
// it.
func (t *trainer) endEpoch(epoch, n int, er *EpochResult, began time.Time) (err error) {
	cfg := t.cfg
	step := epoch * n
	atCheckpoint := cfg.CheckpointEvery > 0 && step%cfg.CheckpointEvery == 0
	if atCheckpoint {
		if err := t.vm.Flush(t.ctx); err != nil {
			return err
		}
	}
	er.measure(time.Since(began), cfg)
	if cfg.Delays == nil {
		er.Utilization = t.vm.Report().Utilization
	}
	if er.Accuracy, err = t.accuracy(); err != nil {
		return err
	}
	er.Clock = time.Since(t.began)
	t.res.Epochs = append(t.res.Epochs, *er)
	if atCheckpoint {
		if err := saveCheckpoint(t.ctx, t.vm, cfg, t.rc, t.res.Epochs, step, epoch+1, 0); err != nil {
			return err
		}
	}
	if cfg.Progress != nil {
		cfg.Progress(*er)
	}
	return nil
}

// finish ends a run whose epochs all ran: it flushes the pipeline,
// applying the updates in flight, and sets res.WeightsSHA256 to the hash
// of plan's trained weights and res.ModelAccuracy to their test accuracy
// (measured again only after an asynchronous schedule, whose flush
// changed them).
func (t *trainer) finish(plan *graphsplit.Plan) (err error) {
	if err := t.vm.Flush(t.ctx); err != nil {
		return err
	}
	if t.res.WeightsSHA256, err = plan.WeightsSHA256(); err != nil {
		return err
	}
	t.res.ModelAccuracy = t.res.Epochs[len(t.res.Epochs)-1].Accuracy
	if t.cfg.Schedule.Async { // the flush applied the updates in flight
		if t.res.ModelAccuracy, err = t.accuracy(); err != nil {
			return err
		}
	}
	return nil
}

// accuracy is the test accuracy of the weights trained so far, measured
// on the stages, which hold them (nothing is pulled into the driver's
// copy); its time adds to res.Evaluation.
func (t *trainer) accuracy() (float64, error) {
	began := time.Now()
	defer func() { t.res.Evaluation += time.Since(began) }()
	return t.eval.Accuracy(t.test)
}

// InterruptGrace is how long a run whose context is cancelled (Ctrl-C)
// may take to drain its pipeline — the steps already handed out, then a
// flush — before the engine is stopped where it stands.
const InterruptGrace = 10 * time.Second

// drain ends a run its context stopped: it flushes the pipeline, so that
// the learnables hold every step that ran, and sets res.WeightsSHA256 to
// their hash (the run stays Interrupted, without ModelAccuracy). A drain
// that fails (a stage gone, InterruptGrace over) leaves no hash: the
// weights are not a model.
func (t *trainer) drain(plan *graphsplit.Plan) {
	if t.vm.Flush(t.ctx) != nil {
		return
	}
	t.res.WeightsSHA256, _ = plan.WeightsSHA256()
}

// feedsOf yields batches, in order, as a source for asyncvm.VM.Stream,
// and, once stop is done, an error instead of the next one: the
// minibatches read before it still train.
func feedsOf(stop context.Context, batches []map[*gorgonia.Node]gorgonia.Value) iter.Seq2[map[*gorgonia.Node]gorgonia.Value, error] {
	return func(yield func(map[*gorgonia.Node]gorgonia.Value, error) bool) {
		for _, b := range batches {
			if err := stop.Err(); err != nil {
				yield(nil, errors.Wrap(err, "train: interrupted"))
				return
			}
			if !yield(b, nil) {
				return
			}
		}
	}
}

// measure sets the epoch's Wall, Loss and SamplesPerSec from the losses of
// the steps that ran.
func (e *EpochResult) measure(wall time.Duration, cfg Config) {
	e.Wall = wall
	e.Loss = 0
	for _, l := range e.Losses {
		e.Loss += l / float64(len(e.Losses))
	}
	if wall > 0 {
		e.SamplesPerSec = float64(len(e.Losses)*cfg.Microbatch*cfg.Microbatches) / wall.Seconds()
	}
}
