package zoo_test

import (
	"context"
	"fmt"
	"log"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
)

// Load the embedded Fashion-MNIST subset.
func ExampleLoadFashionMNIST() {
	train, test, err := zoo.LoadFashionMNIST("embedded")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(train.Len(), test.Len(), train.Width, train.Height, zoo.FashionClasses[train.Labels[0]])
	// Output: 8000 2000 28 28 Ankle boot
}

// Train the zoo MLP for one epoch on the first 640 images with PipeMare at
// fine grain, T1 and T2, and measure test accuracy.
func ExampleTrain() {
	train, test, err := zoo.LoadFashionMNIST("embedded")
	if err != nil {
		log.Fatal(err)
	}
	res, err := zoo.Train(context.Background(), zoo.MLP, train.Head(640), test.Head(200), zoo.Config{
		Schedule: schedule.PipeMare, Microbatch: 16, Microbatches: 4, Epochs: 1,
		LR: 0.03, T1: 10, T2: 0.9, Seed: 1,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d stages, %d steps, accuracy above chance: %v\n",
		res.Model, res.Stages, len(res.Epochs[0].Losses), res.Accuracy > 0.3)
	// Output: mlp: 3 stages, 10 steps, accuracy above chance: true
}

// The ResNet's recipe, as its accuracy check and pipemare train use it, for
// the embedded training set (8,000 images: 125 minibatches of 16 × 4).
func ExampleRecipeFor() {
	r, err := zoo.RecipeFor("resnet")
	if err != nil {
		log.Fatal(err)
	}
	c, err := r.Config(r.Method, 125)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, %s: N=%d × %d rows, %d epochs, lr %g with %s, warm-up %d steps, T1 K=%d, T2 γ=%g, spike compensation %v\n",
		r.Model, r.Method, c.Microbatches, c.Microbatch, c.Epochs, c.LR, c.SolverName(), c.Warmup, c.T1, c.T2, c.Spike)
	// Output: resnet, spike: N=16 × 4 rows, 3 epochs, lr 0.05 with Momentum(0.9), warm-up 125 steps, T1 K=250, T2 γ=0, spike compensation true
}
