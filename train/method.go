package train

import (
	"strings"

	"github.com/pipemare/pipemare/zoo"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pkg/errors"
)

// Method is a named way of training a recipe's model: a schedule and the
// techniques around each stage's solver, composed from the library's parts
// (Config's fields). Method.Apply sets them on a synchronous run.
type Method string

// The methods. Each one's measurements are in the README's sweep section
// (pipemare sweep).
const (
	// MethodSequential is the synchronous baseline: schedule.Sequential(),
	// no technique.
	MethodSequential Method = "sequential"
	// MethodNaive is asynchronous PipeMare with no technique at all.
	MethodNaive Method = "naive"
	// MethodPipeMare is PipeMare's own: the recipe's synchronous warm-up
	// (T3), T1 over every step after it and T2 with γ = 0.9.
	MethodPipeMare Method = "pipemare"
	// MethodSpike is PipeMare with spike compensation (Kosson et al.,
	// correction.NewSpike) around the momentum solver, with T1 and the
	// warm-up; it needs momentum.
	MethodSpike Method = "spike"
	// MethodPredict is PipeMare with linear weight prediction (Kosson et
	// al., correction.NewPredictor): the forwards read w + τ_i·δ; with T1
	// and the warm-up, without T2 (which would undo the prediction).
	MethodPredict Method = "predict"
	// MethodNAdam is AsyncPP (Ajanthan et al.): weight stashing
	// (schedule.PipeDream()) and NAdam with their hyper-parameters and
	// schedule (Config.NAdam), no T1, T2 or warm-up.
	MethodNAdam Method = "nadam"
	// Method2BW is PipeDream-2BW (schedule.PipeDream2BW()): two weight
	// versions, every gradient one update late, the recipe's solver; it
	// needs N ≥ 2P−1 microbatches.
	Method2BW Method = "2bw"
)

// Methods returns every method, the synchronous baseline first.
func Methods() []Method {
	return []Method{MethodSequential, MethodNaive, MethodPipeMare, MethodSpike, MethodPredict, MethodNAdam, Method2BW}
}

// ParseMethod returns the method named s, or an error listing the names.
func ParseMethod(s string) (Method, error) {
	var names []string
	for _, m := range Methods() {
		if string(m) == s {
			return m, nil
		}
		names = append(names, string(m))
	}
	return "", errors.Errorf("train: no method %q (one of %s)", s, strings.Join(names, ", "))
}

// nadamLR is AsyncPP's η (run.bash: --lr 3e-4).
const nadamLR = 3e-4

// Apply returns c, a synchronous run such as zoo.Recipe.Run (Schedule, T1,
// T2, Warmup, Spike, Predict and NAdam unset), set up to train with m on
// a training set of stepsPerEpoch minibatches; warmupEpochs is the
// synchronous warm-up of the methods that have one (zoo.Recipe.Warmup). The
// NAdam method sets LR to AsyncPP's 3e-4. Every asynchronous method but
// 2BW keeps c's other settings, so a method's run differs from the
// baseline's only in what the method names.
func (m Method) Apply(c Config, warmupEpochs, stepsPerEpoch int) (Config, error) {
	withT1 := func(c Config) Config {
		c.Warmup = warmupEpochs * stepsPerEpoch
		c.T1 = c.StepsAfterWarmup(stepsPerEpoch)
		return c
	}
	switch m {
	case MethodSequential:
		c.Schedule = schedule.Sequential()
	case MethodNaive:
		c.Schedule = schedule.PipeMare()
	case MethodPipeMare:
		c.Schedule = schedule.PipeMare()
		c = withT1(c)
		c.T2 = 0.9
	case MethodSpike:
		if c.beta() == 0 {
			return c, errors.Errorf("train: method %s: spike compensation needs momentum, and the run has none (SGD)", m)
		}
		c.Schedule = schedule.PipeMare()
		c = withT1(c)
		c.Spike = true
	case MethodPredict:
		c.Schedule = schedule.PipeMare()
		c = withT1(c)
		c.Predict = true
	case MethodNAdam:
		c.Schedule = schedule.PipeDream()
		c.NAdam, c.LR = true, nadamLR
	case Method2BW:
		c.Schedule = schedule.PipeDream2BW()
	default:
		_, err := ParseMethod(string(m))
		return c, err
	}
	return c, nil
}

// FromRecipe returns r's run trained with m (r.Method, the recipe's
// default, when m is empty) on a training set of stepsPerEpoch
// minibatches.
func FromRecipe(r zoo.Recipe, m Method, stepsPerEpoch int) (Config, error) {
	if m == "" {
		var err error
		if m, err = ParseMethod(r.Method); err != nil {
			return Config{}, errors.Wrapf(err, "train: the %s recipe's method", r.Model)
		}
	}
	return m.Apply(Config{Hyper: r.Run}, r.Warmup, stepsPerEpoch)
}

// WithoutTechniques is c with PipeMare's techniques and Kosson et al.'s
// corrections off (T1, T2, warm-up, spike compensation, prediction): what a
// synchronous or weight-stashing schedule runs, and naive asynchrony.
func (c Config) WithoutTechniques() Config {
	c.T1, c.T2, c.Warmup, c.Spike, c.Predict = 0, 0, 0, false, false
	return c
}
