// Package solvers holds the parts a pipeline stage's solver is made of
// that Gorgonia does not provide: the State a solver saves and restores
// (Stateful, with PutList and List for per-learnable tensors), Chain,
// which lists the layers of a decorated solver, and NAdam, the optimizer
// of the AsyncPP method (Ajanthan et al., ICML 2025): NAdamW with
// gradient-norm clipping, exactly as PyTorch computes it.
package solvers
