package train

import (
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/zoo"
)

// Resolved is s with every setting that reaches a stage given the value
// it has in c, which must be ConfigFor's of s and r: the method's name
// (s's, else the recipe's), the schedule's, the batch, the run's length,
// the rate and its annealing, the momentum in use, T1, T2, the warm-up,
// whether activations are kept, and the seed. Where the data is read
// from, the stages and the cut and the test examples are s's.
//
// Its Identity is what peers compare at the handshake (launch.Place.Spec):
// two processes whose settings resolve alike run the same computation, so
// a stage given -lr equal to the recipe's rate is accepted by a driver
// that left it alone, and one with another value is refused, the error
// naming the setting and both resolved values.
func Resolved(s runspec.Spec, r zoo.Recipe, c Config) runspec.Spec {
	out := s
	if out.Method == "" {
		out.Method = r.Method
	}
	out.Schedule = c.Schedule.Name
	out.Microbatch, out.Microbatches, out.Epochs, out.LR = c.Microbatch, c.Microbatches, c.Epochs, c.LR
	beta, seed := c.beta(), c.Seed
	cosine, stash := c.Cosine, c.KeepActivations
	t1, t2, warmup := c.T1, c.T2, c.Warmup
	out.Momentum, out.Cosine, out.StepDecay = &beta, &cosine, c.StepDecay
	out.T1, out.T2, out.Warmup, out.Stash, out.Seed = &t1, &t2, &warmup, &stash, &seed
	return out
}
