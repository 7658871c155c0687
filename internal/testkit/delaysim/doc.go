// Package delaysim trains a solver on a delayed quadratic through exactly
// the hooks a pipeline stage's solver gets from the engine (package
// asyncvm): SetDelay before the first step, then at every step a forward
// that reads ForwardWeights (or the current weights), a backward of the
// microbatch forwarded τ steps earlier that reads BackwardWeights (or what
// that forward read, as with weight stashing), and Step with the gradient
// of f(w) = ½·wᵀHw at the weights the backward read.
//
// It is the model of the theory tests: w_{k+1} = w_k + update(H·u_{k−τ}),
// whose stability and speed are compared there with the characteristic
// polynomials of each method. Forwards before the first step (the
// pipeline's fill) read the initial weights.
package delaysim
