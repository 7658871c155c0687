package train_test

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"strings"
	"time"

	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// Train the zoo MLP for one epoch on the first 640 images with PipeMare at
// fine grain, T1 and T2, and measure test accuracy.
func ExampleTrain() {
	images, test, err := zoo.LoadFashionMNIST("embedded")
	if err != nil {
		log.Fatal(err)
	}
	res, err := train.Train(context.Background(), zoo.MLP, images.Head(640), test.Head(200), train.Config{
		Hyper:    zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 1, LR: 0.03, Seed: 1},
		Schedule: schedule.PipeMare(), T1: 10, T2: 0.9,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d stages, %d steps, accuracy above chance: %v\n",
		res.Model, res.Stages, len(res.Epochs[0].Losses), res.Accuracy > 0.3)
	// Output: mlp: 3 stages, 10 steps, accuracy above chance: true
}

// The ResNet's recipe as a run of its default method, as its accuracy
// check and pipemare train use it, for the embedded training set (8,000
// images: 125 minibatches of 16 × 4).
func ExampleFromRecipe() {
	r, err := zoo.RecipeFor("resnet")
	if err != nil {
		log.Fatal(err)
	}
	c, err := train.FromRecipe(r, "", 125)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, %s: N=%d × %d rows, %d epochs, lr %g with %s, warm-up %d steps, T1 K=%d, T2 γ=%g, spike compensation %v\n",
		r.Model, r.Method, c.Microbatches, c.Microbatch, c.Epochs, c.LR, c.SolverName(), c.Warmup, c.T1, c.T2, c.Spike)
	// Output: resnet, spike: N=16 × 4 rows, 3 epochs, lr 0.05 with Momentum(0.9), warm-up 125 steps, T1 K=250, T2 γ=0, spike compensation true
}

// A run whose stages are processes of the pipemare command on this host
// (launch.LocalDriver), restarted from its last checkpoint up to 3 times
// when a stage process dies or stalls: each restart ends the processes
// (Disconnect), starts them anew (Connect) and resumes. Result.Restarts
// records them. (Not run: it needs the pipemare binary.)
func ExampleConfig_maxRestarts() {
	images, test, err := zoo.LoadFashionMNIST("embedded")
	if err != nil {
		log.Fatal(err)
	}
	d := &launch.LocalDriver{Config: launch.LocalConfig{Stages: 3, Executable: "pipemare", Insecure: true,
		Args: func(i int, _ []int, addrs []string, _ string) []string {
			// pipemare stage, serving stage i of the same run as the driver's Config.
			return []string{"stage", "-model=mlp", "-limit=640", "-microbatch=16", "-microbatches=4", "-epochs=2", "-lr=0.03", "-t1=10", "-t2=0.9", "-stage=" + strconv.Itoa(i), "-stage-addrs=" + strings.Join(addrs, ","), "-listen=fd:3", "-insecure"}
		}}}
	defer d.Stop(10 * time.Second)
	res, err := train.Train(context.Background(), zoo.MLP, images.Head(640), test.Head(200), train.Config{
		Hyper:    zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 2, LR: 0.03, Seed: 1},
		Schedule: schedule.PipeMare(), T1: 10, T2: 0.9,
		Connect: d.Connect, CheckpointEvery: 5, CheckpointDir: "run/checkpoints",
		MaxRestarts: 3, Disconnect: func(error) error { return d.Stop(2 * time.Second) },
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res.Restarts {
		fmt.Printf("stage %d failed (%s); resumed from step %d in %v\n", r.Stage, r.Reason, r.FromStep, r.Took)
	}
}
