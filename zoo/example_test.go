package zoo_test

import (
	"fmt"
	"log"

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

// The ResNet's recipe, as its accuracy check and pipemare train use it:
// its numbers and its default method (train.FromRecipe makes it a run).
func ExampleRecipeFor() {
	r, err := zoo.RecipeFor("resnet")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, %s: N=%d × %d rows, %d epochs, lr %g, warm-up %d epoch\n",
		r.Model, r.Method, r.Run.Microbatches, r.Run.Microbatch, r.Run.Epochs, r.Run.LR, r.Warmup)
	// Output: resnet, spike: N=16 × 4 rows, 3 epochs, lr 0.05, warm-up 1 epoch
}
