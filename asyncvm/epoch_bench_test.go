//go:build unix

package asyncvm_test

import (
	"context"
	"testing"
	"time"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// epochSamples is the training examples of a BenchmarkEpoch epoch.
const epochSamples = 2048

// BenchmarkEpoch sets a training epoch beside the step it is made of, per
// training sample (ns/sample), for the MLP, the CNN and the ResNet:
//
//   - variant=step is BenchmarkStep's engine-fine at the recipe's
//     microbatch: one microbatch's forward, backward and update, keeping
//     activations, the least a sample can cost the engine;
//   - variant=epoch is the training time of one epoch of train.Train (what
//     `pipemare train -stages 1 -method sequential` reports as samples/s:
//     EpochResult.Wall, evaluation excluded) on the recipe's first
//     epochSamples examples, one stage, the recipe's N and activations.
//
// The ratio epoch ÷ step is what the loop costs beyond its steps. One op of
// the epoch variant is a whole Train (the model built and cut, and one
// test image evaluated) and its ns/op says nothing; read ns/sample. Run it
// pinned to one thread and interleaved:
//
//	go test -c -o asyncvm.test ./asyncvm/
//	for i in 1 2 3 4 5 6; do
//	  GOMAXPROCS=1 taskset -c 1 ./asyncvm.test -test.run '^$' -test.bench 'Epoch' -test.count 1
//	done > epoch.txt
//	benchstat -col /variant epoch.txt
func BenchmarkEpoch(b *testing.B) {
	for _, name := range []string{"mlp", "cnn", "resnet"} {
		r, err := zoo.RecipeFor(name)
		if err != nil {
			b.Fatal(err)
		}
		rows := r.Run.Microbatch
		b.Run(name+"/variant=step", func(b *testing.B) {
			benchEngine(b, r, rows, 1, engineVariants[1], graphsplit.FineGrained())
		})
		b.Run(name+"/variant=epoch", func(b *testing.B) { benchEpoch(b, r) })
	}
}

// benchEpoch trains recipe r's model for one epoch on epochSamples
// examples per op, and reports the epochs' training time per sample.
func benchEpoch(b *testing.B, r zoo.Recipe) {
	trainSet, test, err := r.Load("embedded", epochSamples)
	if err != nil {
		b.Fatal(err)
	}
	if d, ok := test.(*zoo.Dataset); ok {
		test = d.Head(1) // evaluation is not what this measures
	}
	ov := runspec.Spec{Model: r.Model, Stages: "1", Method: "sequential", Epochs: 1}
	cfg, err := train.ConfigFor(ov, r, trainSet.Len())
	if err != nil {
		b.Fatal(err)
	}
	// The clock runs from the first step's loss to the last's: the steps
	// of an epoch but its first, without the model's build and cut.
	var wall, cpu time.Duration
	samples := 0
	var t0 time.Time
	var c0 time.Duration
	cfg.ProgressEvery = 1
	cfg.Steps = func(done, total int) {
		switch done {
		case 1:
			t0, c0 = time.Now(), cpuTime()
		case total:
			wall += time.Since(t0)
			cpu += cpuTime() - c0
			samples += (total - 1) * cfg.Microbatch * cfg.Microbatches
		}
	}
	ctx := context.Background()
	if _, err := train.Train(ctx, r.Build, trainSet, test, cfg); err != nil { // warm up
		b.Fatal(err)
	}
	wall, cpu, samples = 0, 0, 0
	for b.Loop() {
		if _, err := train.Train(ctx, r.Build, trainSet, test, cfg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(samples), "cpu-ns/sample")
	b.ReportMetric(float64(wall.Nanoseconds())/float64(samples), "ns/sample")
}
