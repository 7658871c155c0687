// Package solvers holds the parts a pipeline stage's solver is made of
// that Gorgonia does not provide: the State a solver saves and restores
// (Stateful), and Chain, which lists the layers of a decorated solver.
package solvers
