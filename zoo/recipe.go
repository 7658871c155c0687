package zoo

import (
	"strings"

	"github.com/pkg/errors"
)

// Recipe is how a zoo model is trained, calibrated on the embedded data:
// where cmd/pipemare starts from, and the run its accuracy check trains
// (on fewer epochs or images where the check says why). Package train
// turns it into a run (train.FromRecipe).
type Recipe struct {
	Model string
	Build Builder
	// Run is the synchronous run's numbers.
	Run Hyper
	// Warmup is PipeMare's synchronous warm-up in epochs (PipeMareW), for
	// the methods that have one.
	Warmup int
	// Method names how the model trains asynchronously by default (a
	// train.Method): its accuracy check's method and pipemare train's.
	Method string
	load   func(dir string, limit int) (train, test Data, err error)
}

// Hyper is what a recipe fixes of a run: the batch, the length, the base
// solver's numbers and the seed.
type Hyper struct {
	// Microbatch is the rows of one microbatch (the model's batch size);
	// Microbatches is N, the microbatches of a minibatch.
	Microbatch, Microbatches int
	Epochs                   int
	// LR is the base learning rate, annealed with a cosine to LR/100 over
	// the run when Cosine is set; Momentum is the solver's β (0: 0.9),
	// NoMomentum asks for plain SGD.
	LR         float64
	Cosine     bool
	Momentum   float64
	NoMomentum bool
	Seed       int64
	// KeepActivations keeps each stage's activations between forward and
	// backward instead of recomputing them (for models whose stages are
	// stateless).
	KeepActivations bool
}

// Load returns the data the model trains on, from dir: "embedded" (the
// subsets in the binary), "" (Fashion-MNIST: $PIPEMARE_FASHION_DIR, else
// Debian's package, else embedded; CMUdict: embedded) or a directory, with
// only the first limit training examples when limit > 0.
func (r Recipe) Load(dir string, limit int) (train, test Data, err error) {
	return r.load(dir, limit)
}

func loadFashion(dir string, limit int) (Data, Data, error) {
	train, test, err := loadFashionMNIST(dir, limit)
	if err != nil {
		return nil, nil, err
	}
	return train.Head(limit), test, nil
}

func loadCMUdict(dir string, limit int) (Data, Data, error) {
	if dir == "embedded" {
		dir = ""
	}
	train, test, err := LoadCMUdict(dir)
	if err != nil {
		return nil, nil, err
	}
	if limit > 0 && limit < len(train) {
		train = train[:limit]
	}
	return NewG2PData(train), NewG2PData(test), nil
}

// recipes: each one's measurements and reasons are in accuracy_test.go.
var recipes = []Recipe{
	{Model: "mlp", Build: MLP, Warmup: 1, Method: "pipemare", load: loadFashion,
		Run: Hyper{Microbatch: 16, Microbatches: 4, Epochs: 4, LR: 0.03, Cosine: true, Seed: 1}},
	{Model: "cnn", Build: CNN, Warmup: 1, Method: "pipemare", load: loadFashion,
		Run: Hyper{Microbatch: 16, Microbatches: 4, Epochs: 3, LR: 0.03, Cosine: true, Seed: 1}},
	// 16 microbatches of 4 keep the ResNet's 15 stages at τ_i ≤ 2. Spike
	// compensation, which beat T2 on every seed measured at N = 16 and 4
	// (docs/methods.md).
	{Model: "resnet", Build: ResNet, Warmup: 1, Method: "spike", load: loadFashion,
		Run: Hyper{Microbatch: 4, Microbatches: 16, Epochs: 3, LR: 0.05, Cosine: true, Seed: 1}},
	// 16 microbatches of 2 words keep the Transformer's 20 stages at
	// τ_i ≤ 3; plain SGD, as momentum's stable region collapses under delay;
	// its stages are stateless, so they stash activations (the paper's
	// setting, and faster than recomputing).
	{Model: "transformer", Build: Transformer, Warmup: 4, Method: "pipemare", load: loadCMUdict,
		Run: Hyper{Microbatch: 2, Microbatches: 16, Epochs: 16, LR: 0.25, NoMomentum: true, Cosine: true, Seed: 1, KeepActivations: true}},
	// The same with tied input and output embeddings: the first stage and
	// the last share the embedding.
	{Model: "transformer-tied", Build: TiedTransformer, Warmup: 4, Method: "pipemare", load: loadCMUdict,
		Run: Hyper{Microbatch: 2, Microbatches: 16, Epochs: 16, LR: 0.25, NoMomentum: true, Cosine: true, Seed: 1, KeepActivations: true}},
}

// Recipes returns every zoo model's recipe.
func Recipes() []Recipe { return append([]Recipe(nil), recipes...) }

// Models returns the names of the zoo's models, in the order of Recipes:
// the names RecipeFor knows.
func Models() []string {
	names := make([]string, len(recipes))
	for i, r := range recipes {
		names[i] = r.Model
	}
	return names
}

// RecipeFor returns the named model's recipe.
func RecipeFor(model string) (Recipe, error) {
	for _, r := range recipes {
		if r.Model == model {
			return r, nil
		}
	}
	return Recipe{}, errors.Errorf("zoo: no model %q (one of %s)", model, strings.Join(Models(), ", "))
}
