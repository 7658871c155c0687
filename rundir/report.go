package rundir

import (
	"time"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// Report is report.json of pipemare train, and one run of compare's:
// the settings the run trained with and what it measured. Every key is
// snake_case; durations are integer nanoseconds (keys ending in _ns).
type Report struct {
	// Label names the run in compare's table ("pipemare (naive)"); train
	// leaves it out.
	Label string `json:"label,omitempty"`
	// Settings are the run's settings: the model's recipe with the flags
	// given on top.
	Settings Settings `json:"settings"`
	// TimeToTarget is compare's training time (evaluation excluded) until
	// the first epoch whose test accuracy reached -target; absent when no
	// epoch did, and from train's report.
	TimeToTarget time.Duration `json:"time_to_target_ns,omitempty"`
	// Placement is where train's stages ran; compare leaves it out.
	Placement *Placement `json:"placement,omitempty"`
	// Resumed is the checkpoint a resumed run went on from; absent for a
	// run that started afresh.
	Resumed *Resumed `json:"resumed,omitempty"`
	// Result is the run as train.Result serialises it: epochs (losses, test
	// accuracy, an interrupted epoch marked), the engine's asyncvm.Report,
	// the virtual-device replay, the final accuracy and weights_sha256.
	Result *train.Result `json:"result"`
}

// Placement is where a run's stages ran.
type Placement struct {
	// Where is "in-process" (goroutines of the driver), "processes"
	// (train -procs: child processes on this host) or "remote" (stages
	// started elsewhere: -stage-addrs, or a launcher's environment).
	Where string `json:"where"`
	// Launcher is "torchrun" or "jobset" when a launcher started the
	// processes.
	Launcher string `json:"launcher,omitempty"`
	// Transport is "shared memory", "grpc+mtls" or "grpc (plaintext)"
	// between processes.
	Transport string `json:"transport,omitempty"`
	// Addresses are the stage processes' addresses (one per stage, in
	// stage order, when each hosts one; else a process's k-th stage is at
	// its port+k); PIDs the processes train -procs started.
	Addresses []string `json:"addresses,omitempty"`
	PIDs      []int    `json:"pids,omitempty"`
	// Hosts are the stages each process (of PIDs, or at Addresses)
	// hosts, when a process hosts several (train -procs, or -stage-addrs,
	// fewer than the stages), as the run's placement PlacedBy
	// (runspec.Placed's name: balanced, contiguous, round-robin, v) gave
	// them.
	Hosts    [][]int `json:"hosts,omitempty"`
	PlacedBy string  `json:"placed_by,omitempty"`
	// CPUs are the CPUs each stage process was pinned to (-pin), and
	// DriverCPUs this process's (-cpus); absent when not pinned.
	CPUs       []string `json:"cpus,omitempty"`
	DriverCPUs string   `json:"driver_cpus,omitempty"`
}

// Resumed is the checkpoint a run was resumed from.
type Resumed struct {
	// Checkpoint is its directory; Step the minibatches it held.
	Checkpoint string `json:"checkpoint"`
	Step       int64  `json:"step"`
}

// CompareReport is report.json of pipemare compare.
type CompareReport struct {
	// Model is the model every run trained.
	Model string `json:"model"`
	// TargetAccuracy is -target, the accuracy TimeToTarget times.
	TargetAccuracy float64 `json:"target_accuracy"`
	// Runs are the schedules in the order of the table (runs an interrupt
	// left out are missing).
	Runs []Report `json:"runs"`
}

// Settings are a run's settings as report.json and settings.json record
// them: the model's recipe with the spec's changes on top, resolved, and
// the spec itself.
type Settings struct {
	// Spec is the run's specification as given (runspec.Spec): what a
	// process of the run, or a rerun, is started from. A settings.json
	// written before runs carried one has none.
	Spec *runspec.Spec `json:"spec,omitempty"`
	// Model is the zoo model; Data the -data flag; TrainingExamples and
	// TestExamples the sizes of the data used (after -limit).
	Model            string `json:"model"`
	Data             string `json:"data"`
	TrainingExamples int    `json:"training_examples"`
	TestExamples     int    `json:"test_examples"`
	// Schedule is the pipeline schedule; Stages the -stages flag ("fine":
	// one per layer; the plan's count is result.stages).
	Schedule string `json:"schedule"`
	Stages   string `json:"stages"`
	// Cut is where the stages after the first start: positions of the
	// model's ops (-cut; a -stages P that train balanced by measuring;
	// absent for a cut the flags fix alike on every machine).
	Cut []int `json:"cut,omitempty"`
	// MicrobatchRows is the rows of a microbatch, Microbatches N, and
	// StepsPerEpoch the minibatches of N × MicrobatchRows an epoch trains.
	MicrobatchRows int `json:"microbatch"`
	Microbatches   int `json:"microbatches"`
	StepsPerEpoch  int `json:"steps_per_epoch"`
	Epochs         int `json:"epochs"`
	// LR is the base learning rate, cosine-annealed to LR/100 when Cosine
	// is set, divided by 10 at half and three quarters of the run when
	// StepDecay is (NAdam: train.Config.NAdam's schedule); Solver is
	// "Momentum(β)", "SGD" or "NAdam".
	LR        float64 `json:"lr"`
	Cosine    bool    `json:"cosine"`
	StepDecay bool    `json:"step_decay,omitempty"`
	Solver    string  `json:"solver"`
	// Method is the train.Method the run started from (-method, or the
	// recipe's); the fields below say what it turned on, after the flags.
	Method string `json:"method"`
	// T1Steps is T1's rescheduling length K in asynchronous steps, T2Gamma
	// T2's γ, WarmupSteps the synchronous warm-up (0: off, each); Spike
	// and Predict are spike compensation and weight prediction.
	T1Steps     int     `json:"t1"`
	T2Gamma     float64 `json:"t2"`
	WarmupSteps int     `json:"warmup"`
	Spike       bool    `json:"spike"`
	Predict     bool    `json:"predict"`
	// Activations is what stages keep between forward and backward:
	// "recompute" or "keep".
	Activations string `json:"activations"`
	// Kernels is the kernel mode of the matrix products, "exact" or
	// "fast" (train.Config.KernelMode).
	Kernels string `json:"kernels"`
	Seed    int64  `json:"seed"`
	// CheckpointEvery is train's -checkpoint-every: a checkpoint every so
	// many minibatches (0, and absent: none).
	CheckpointEvery int `json:"checkpoint_every,omitempty"`
}

// settingsRenamed are Settings' keys before they were the run
// specification's (settings.json files written before hold them).
var settingsRenamed = map[string]string{"microbatch_rows": "microbatch", "t1_steps": "t1", "t2_gamma": "t2", "warmup_steps": "warmup"}

// UnmarshalJSON reads a settings.json, old keys included (settingsRenamed);
// one written before settings named the kernel mode was exact.
func (s *Settings) UnmarshalJSON(b []byte) error {
	type plain Settings
	if err := runspec.DecodeRenamed(b, (*plain)(s), settingsRenamed); err != nil {
		return err
	}
	if s.Kernels == "" {
		s.Kernels = string(graphsplit.ExactKernels)
	}
	return nil
}

// NewSettings records the run cfg that spec describes, trained on
// trainLen and tested on testLen examples.
func NewSettings(spec runspec.Spec, cfg train.Config, trainLen, testLen int) Settings {
	method, stages := spec.Method, spec.Stages
	if r, err := zoo.RecipeFor(spec.Model); err == nil && method == "" {
		method = r.Method
	}
	if stages == "" {
		stages = "fine"
	}
	acts := "recompute"
	if cfg.KeepActivations {
		acts = "keep"
	}
	return Settings{
		Spec:  &spec,
		Model: spec.Model, Data: spec.Data, TrainingExamples: trainLen, TestExamples: testLen,
		Schedule: cfg.Schedule.Name, Stages: stages, Cut: cfg.Cut,
		MicrobatchRows: cfg.Microbatch, Microbatches: cfg.Microbatches,
		StepsPerEpoch: trainLen / (cfg.Microbatch * cfg.Microbatches), Epochs: cfg.Epochs,
		LR: cfg.LR, Cosine: cfg.Cosine, StepDecay: cfg.StepDecay, Solver: cfg.SolverName(),
		Method: method, T1Steps: cfg.T1, T2Gamma: cfg.T2, WarmupSteps: cfg.Warmup,
		Spike: cfg.Spike, Predict: cfg.Predict,
		Activations: acts, Kernels: string(cfg.KernelMode()), Seed: cfg.Seed, CheckpointEvery: cfg.CheckpointEvery,
	}
}
