// Package solvers holds gorgonia.Solvers whose state we own, and the parts
// a pipeline stage's solver is made of that Gorgonia does not provide.
//
// SGD, Momentum and Adam are gorgonia's VanillaSolver, Momentum and
// AdamSolver (gorgonia.org/gorgonia v0.9.18), option for option and bit
// for bit: the same float operations in the same order, on tensors and
// on scalar learnables, checked against gorgonia's on every zoo model.
// Unlike gorgonia's, whose velocity and moments live in unexported
// fields, they save and restore their state (Stateful), and their
// learning rate can be read and set (LearnRater), which T1's rescheduler
// uses. Their constructors return an error for an option the solver does
// not take, where gorgonia ignores it.
//
// NAdam is the optimizer of the AsyncPP method (Ajanthan et al., ICML
// 2025): NAdamW with gradient-norm clipping, exactly as PyTorch computes it.
//
// A stage's solver is a chain: decorators (T1's rescheduler.Solver, T2's
// correction.Solver) around a solver. Every layer saves only its own state;
// Chain lists the layers, and Save and Load save and restore them all:
//
//	states, err := solvers.Save(stage)        // one State per layer, outermost first
//	…
//	err = solvers.Bind(fresh, model)          // the learnables, before the first step
//	err = solvers.Load(fresh, states)         // checks every layer; changes nothing on error
//
// Check says whether Load would accept states without loading them (every
// layer's CheckState): a checkpoint checks with it that what it wrote
// would resume. Saveable says whether every layer can save its state at
// all. A solver loaded from the states another one saved continues
// bit-identically to it, whatever its learnables — a pipeline stage that
// owns none still saves and restores its step counts. Load last, after anything that sets a layer's
// fields: T1's delay, which the engine announces with SetDelay when it
// starts, is state (a measured delay moves it), and the saved one must
// win. A State is of one kind of solver and one set of
// learnables; loading it into another kind, over other shapes or dtypes,
// or with keys missing or unknown, fails naming what differs.
//
// The engine reaches every layer the same way for its hooks (hooks.go):
// SetDelay, BackwardWeights, ForwardWeights, StateBytes, CorrectionBytes
// walk the chain, so no decorator forwards another's.
package solvers
