// Package zoo holds real models on real data, written as a Gorgonia user
// writes them, their recipes, and the accuracy checks that prove
// asynchronous pipeline training against the synchronous baseline
// (go test ./zoo/...).
//
// Each model builder (MLP, CNN, ResNet, Transformer, TiedTransformer)
// returns a plain *gorgonia.ExprGraph at a given microbatch size with its
// cost, learnables, inputs and prediction node: nothing from the library's
// internals, so the builders double as examples of wrapping an existing
// model.
//
// Each model has a Recipe (RecipeFor): the numbers of its synchronous run
// (Hyper), PipeMare's warm-up and its default method, calibrated on the
// embedded data. Package train turns a recipe into a run
// (train.FromRecipe) and trains it; pipemare train starts from it, and the
// model's accuracy check runs it.
//
// Data: Fashion-MNIST (LoadFashionMNIST), from the Debian package
// dataset-fashion-mnist when it is installed, else the subset embedded in
// the binary, its pixels kept as bytes until a batch reads them, and a
// recipe's load of the first n examples decompressing no more
// (ReadIDXHead); CMUdict word→phoneme pairs (LoadCMUdict, G2PData) for the
// Transformer. Every data set is a Data: its length and the batches a
// model reads.
package zoo
