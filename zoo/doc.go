// Package zoo holds real models on real data, written as a Gorgonia user
// writes them, and the accuracy checks that prove asynchronous pipeline
// training against the synchronous baseline (go test ./zoo/...).
//
// Each model builder returns a plain *gorgonia.ExprGraph at a given
// microbatch size with its cost, learnables, inputs and prediction node:
// nothing from the library's internals, so the builders double as examples
// of wrapping an existing model. Train runs one with any schedule and
// PipeMare's techniques and reports accuracy per epoch.
//
// Each model has a Recipe (RecipeFor): microbatch, N, epochs, rate, solver,
// PipeMare's warm-up — calibrated on the embedded data; pipemare train starts
// from it, and its accuracy check runs it (on fewer epochs or images where
// the check says why).
//
// Data: Fashion-MNIST (LoadFashionMNIST), from the Debian package
// dataset-fashion-mnist when it is installed, else the subset embedded in
// the binary; CMUdict word→phoneme pairs (LoadCMUdict, G2PData) for the
// Transformer.
package zoo
