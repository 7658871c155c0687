package train

import (
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/zoo"
)

// Resolved is c's run specification (Config.Spec) with every setting that
// reaches a stage given the value it has in c, which must be ConfigFor's
// of that spec and r: the method's name (the spec's, else the recipe's),
// the schedule's, the placement (runspec.Placed), the batch, the run's length, the rate and its
// annealing, the momentum in use, T1, T2, the warm-up, whether
// activations are kept, the kernel mode, and the seed. Where the data is read from, the
// stages and the cut and the test examples are the spec's.
//
// Its Identity is what peers compare at the handshake (launch.Place.Spec):
// two processes whose settings resolve alike run the same computation, so
// a stage given a rate equal to the recipe's is accepted by a driver that
// left the rate alone, and one given another is refused, the error naming
// the setting and both resolved values.
func Resolved(r zoo.Recipe, c Config) runspec.Spec {
	out := c.Spec
	if out.Method == "" {
		out.Method = r.Method
	}
	out.Schedule = c.Schedule.Name
	if pl, err := runspec.Placed(c.Spec.Placement, c.Schedule); err == nil { // ConfigFor has refused any other
		out.Placement = pl.String()
	}
	out.Microbatch, out.Microbatches, out.Epochs, out.LR = c.Microbatch, c.Microbatches, c.Epochs, c.LR
	beta, seed := c.beta(), c.Seed
	cosine, stash := c.Cosine, c.KeepActivations
	t1, t2, warmup := c.T1, c.T2, c.Warmup
	out.Momentum, out.Cosine, out.StepDecay = &beta, &cosine, c.StepDecay
	out.T1, out.T2, out.Warmup, out.Stash, out.Seed = &t1, &t2, &warmup, &stash, &seed
	out.Kernels = string(c.KernelMode())
	return out
}
