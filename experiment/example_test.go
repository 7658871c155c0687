package experiment_test

import (
	"context"
	"fmt"
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
