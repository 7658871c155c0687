package graphsplit_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/zoo"
	"gorgonia.org/gorgonia"
)

// BenchmarkSplitBackward times, on the zoo's MLP, CNN and ResNet at their
// recipes' microbatch cut into 2 stages, what one microbatch's backward
// costs every stage: the keeping backward (B), its input-gradient half (I,
// what a zero-bubble schedule runs on the critical path) and its
// weight-gradient half (W, deferred into the bubbles), each summed over the
// stages that split. I + W is B's arithmetic; I alone is what the
// critical path pays. Pin it to one CPU and interleave the variants
// (docs/speed.md):
//
//	go test -c -o graphsplit.test ./graphsplit/
//	for i in 1 2 3 4 5; do GOMAXPROCS=1 taskset -c 1 ./graphsplit.test -test.run '^$' -test.bench SplitBackward -test.count 1; done > split.txt
//	benchstat -col /half split.txt
func BenchmarkSplitBackward(b *testing.B) {
	graphsplit.UseFastBLAS()
	for _, name := range []string{"mlp", "cnn", "resnet"} {
		r, err := zoo.RecipeFor(name)
		if err != nil {
			b.Fatal(err)
		}
		runs := splitRuns(b, r)
		for _, half := range []string{"backward", "input", "weight"} {
			b.Run(fmt.Sprintf("%s/half=%s", name, half), func(b *testing.B) {
				for b.Loop() {
					for _, sr := range runs {
						if err := sr.run(half); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// splitRun is one stage's programs and the values they read: what its
// keeping forward kept, output gradients, and what Input kept for Weight.
type splitRun struct {
	k          *graphsplit.Keeping
	sb         *graphsplit.SplitBackward
	kept, og   []gorgonia.Value
	weightFrom []gorgonia.Value
}

func (sr splitRun) run(half string) error {
	var err error
	switch half {
	case "backward":
		_, err = sr.k.Backward.Run(sr.kept, sr.og)
	case "input":
		_, err = sr.sb.Input.Run(sr.kept, sr.og)
	case "weight":
		_, err = sr.sb.Weight.Run(sr.weightFrom, nil)
	}
	return err
}

// splitRuns builds r's model cut into 2 stages, runs its keeping forwards
// on random data once, and returns the stages that split.
func splitRuns(b *testing.B, r zoo.Recipe) []splitRun {
	m, err := r.Build(r.Run.Microbatch, r.Run.Seed)
	if err != nil {
		b.Fatal(err)
	}
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.Stages(2))
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	acts := make(map[int64]gorgonia.Value)
	for _, f := range plan.Feeds {
		acts[f.Key] = graphsplit.RandomValue(rng, f.Node.Dtype(), f.Node.Shape())
	}
	var runs []splitRun
	for s, st := range plan.Stages {
		if !plan.CanKeep(s) {
			b.Fatalf("stage %d cannot keep its activations", s)
		}
		k, sb, err := plan.NewSplitKeeping(s)
		if err != nil {
			b.Fatal(err)
		}
		in := make([]gorgonia.Value, len(st.Inputs))
		for i, pt := range st.Inputs {
			in[i] = acts[pt.Key]
		}
		res, err := k.Forward.Run(in, nil)
		if err != nil {
			b.Fatal(err)
		}
		if res, err = res.Clone(); err != nil {
			b.Fatal(err)
		}
		for i, pt := range st.Outputs {
			acts[pt.Key] = res.Outputs[i]
		}
		if sb == nil {
			continue
		}
		sr := splitRun{k: k, sb: sb, kept: res.Kept, og: make([]gorgonia.Value, len(st.Outputs))}
		for i, ph := range k.Backward.OutputGrads {
			if ph != nil {
				sr.og[i] = graphsplit.RandomValue(rng, ph.Dtype(), ph.Shape())
			}
		}
		ires, err := sb.Input.Run(sr.kept, sr.og)
		if err != nil {
			b.Fatal(err)
		}
		if ires, err = ires.Clone(); err != nil {
			b.Fatal(err)
		}
		sr.weightFrom = ires.Kept
		for _, p := range []*graphsplit.Program{k.Backward, sb.Weight} { // not timed
			if err := p.Compile(); err != nil {
				b.Fatal(err)
			}
		}
		runs = append(runs, sr)
	}
	return runs
}
