package experiment_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/pipemare/pipemare/experiment"
	"github.com/pipemare/pipemare/zoo"
)

// Sweep the zoo MLP on 192 embedded images (100 to test): the synchronous
// baseline and PipeMare with a warm-up of a tenth of the run, at N = 2,
// over 2 epochs and two seeds; then run the same sweep again, which
// finds every run in its cache and trains nothing.
func ExampleSweep() {
	r, err := zoo.RecipeFor("mlp")
	if err != nil {
		log.Fatal(err)
	}
	trainSet, test, err := r.Load("embedded", 192)
	if err != nil {
		log.Fatal(err)
	}
	test = test.(*zoo.Dataset).Head(100) // as -test-limit 100
	var methods []experiment.Variant
	for _, m := range []string{"sequential", "pipemare(warmup=0.1)"} {
		v, err := experiment.ParseVariant(m)
		if err != nil {
			log.Fatal(err)
		}
		methods = append(methods, v)
	}
	settings, err := experiment.ParseSettings("2", "")
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sweep")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for range 2 {
		s := &experiment.Sweep{
			Grid:   experiment.Grid{Model: "mlp", Data: "embedded", Stages: "fine", Limit: 192, TestLimit: 100, Methods: methods, Settings: settings, Epochs: []int{2}, Seeds: []int64{1, 2}},
			Recipe: r, TrainData: trainSet, TestData: test,
			Cache: experiment.Cache{Dir: filepath.Join(dir, "runs")}, Work: filepath.Join(dir, "work"),
		}
		rep, err := s.Run(context.Background())
		if err != nil {
			log.Fatal(err)
		}
		files, err := os.ReadDir(s.Cache.Dir)
		if err != nil {
			log.Fatal(err)
		}
		c := rep.Cells[len(rep.Cells)-1] // PipeMare's at 2 epochs
		fmt.Printf("%d runs cached; τ₀ = %g; %s at %d epochs: %d asynchronous steps, gap measured on seeds %v\n",
			len(files), rep.Settings[0].Tau0, c.Method, c.Epochs, c.AsyncSteps, c.Gap.Seeds)
	}
	// Output:
	// 4 runs cached; τ₀ = 3; pipemare(warmup=0.1) at 2 epochs: 5 asynchronous steps, gap measured on seeds [1 2]
	// 4 runs cached; τ₀ = 3; pipemare(warmup=0.1) at 2 epochs: 5 asynchronous steps, gap measured on seeds [1 2]
}

// Time the zoo MLP to 60 % test accuracy in this process on every CPU,
// two seeds, each training a pipemare train child of the program at exe
// ("": this one) — here a stand-in that reports its epochs' accuracies and
// clocks, as train's report.json does.
func ExampleTimeToAccuracy() {
	placements, err := experiment.TargetPlacements([]string{"cores"}, 1, "1")
	if err != nil {
		log.Fatal(err)
	}
	tta := experiment.TimeToAccuracy{Target: 0.6}
	err = tta.Run(context.Background(), []int64{1, 2}, placements, func(_ context.Context, p experiment.TargetPlacement, seed int64) ([]byte, string, error) {
		// A real run: tta.RunTargetChildren(ctx, "", experiment.TargetArgs(flags, cut), dir, seeds, placements, os.Stdout).
		report := fmt.Sprintf(`{"result": {"weights_sha256": "w%d", "report": {"samples_per_sec": 1000},
			"epochs": [{"test_accuracy": 0.55, "clock_ns": 2000000000}, {"test_accuracy": 0.6%d, "clock_ns": 4000000000}]}}`, seed, seed)
		return []byte(report), "", nil
	}, io.Discard)
	if err != nil {
		log.Fatal(err)
	}
	tta.Table(os.Stdout)
	// Output:
	// | placement | reached 0.6000 | time to target, s | epochs | samples/s |
	// |---|---|---|---|---|
	// | cores | 2 of 2 | 4.00 (4.00–4.00) | 2 | 1000 (1000–1000) |
}
