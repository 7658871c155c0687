package train_test

import (
	"context"
	"fmt"
	"log"

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
