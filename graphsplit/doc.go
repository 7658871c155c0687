// Package graphsplit cuts an existing Gorgonia model into pipeline stages.
//
// A Gorgonia user has a model: an *ExprGraph built at the microbatch size, a
// scalar cost node and the list of learnables. Split turns it into a Plan of P
// stages. Each Stage owns new ExprGraphs rebuilt by re-applying the user's own
// op objects (gorgonia.ApplyOp), so a stage computes exactly what the original
// graph computes:
//
//	plan, err := graphsplit.Split(g, cost, learnables, graphsplit.FineGrained())
//
// Every stage has
//
//   - a uniquely named placeholder for each activation it consumes from any
//     earlier stage (skip connections may jump several stages) and for each
//     data input it reads (Stage.Inputs);
//   - the learnables its ops read, bound to the user's own value tensors
//     (no copies);
//   - its forward outputs: the activations later stages need, or the cost in
//     the last stage (Stage.Outputs);
//   - a forward-only Program and a Train Program that recomputes the forward
//     pass and runs the symbolic backward built with gorgonia.Backpropagate:
//     gradient placeholders for the outputs, gradients for the inputs and the
//     learnables;
//   - the list of stateful ops (BatchNorm, MaxPool, GroupNorm, AvgPool)
//     whose op objects keep state between Do and the backward;
//   - optionally (NewKeeping, where CanKeep holds) a forward that also
//     returns what the backward reads, and a backward that reads it instead
//     of recomputing the forward; that backward split in two
//     (NewSplitKeeping, SplitBackward): the input gradients' ops, then the
//     learnables' gradients' from what the first half kept, bit for bit
//     the backward.
//
// Where a stage re-applies a BatchNorm, a MaxPool2D, a Conv2d, a Rectify or
// a broadcast bias, it computes it with its own ops (internal/stageops),
// bit-identical to gorgonia's with its default BLAS: BatchNorm's statistics
// and MaxPool's argmax become nodes the backward reads, so those ops keep no
// state and their stages can keep their activations; BatchNorm's scale,
// bias and Rectify run in one pass; a convolution writes its output in NCHW
// without a transpose. WithoutOpSubstitution turns this off.
//
// UseFastBLAS, called once by a program before it trains (train.Train,
// train.ServeStage and the pipemare command do), makes gorgonia's matrix
// products — the user's graph's and every stage's — run on the stage ops'
// BLAS: gonum's, bit for bit, serial where SetWorkers gives a kernel one
// goroutine, faster for float32. Importing the package swaps nothing.
// Built with -tags openblas (cgo; Debian: apt-get install libopenblas-dev),
// UseFastBLAS chooses OpenBLAS (gorgonia.Use with gonum's netlib binding)
// instead; results then agree with the default build's to float rounding.
// HoldKernels chooses the kernel mode of that BLAS's float32 products while
// a run holds it: ExactKernels (gonum's bits, the default) or FastKernels
// (fused multiply-adds in their own fixed order); the mode is the
// process's, one at a time.
//
// Where to cut is chosen by options: P stages balanced by a cost model
// (estimated FLOPs and bytes, or measured time per op), one stage per
// learnable-bearing layer (FineGrained, the PipeMare paper's setting), or
// explicit cut points by node name. OnWorkers balances the workers that
// will host several stages each (ZB-V's V, interleaving's round robin)
// instead of the stages.
//
// A stage is run through its Programs. Program.Run binds the inputs and
// runs the program on the stage programs' executor (internal/tape): the
// instructions gorgonia's compiler produces, on the calling goroutine, each
// op's output written into a buffer the program owns and reuses from run
// to run, bit for bit what gorgonia's tape machine computes (RunOnTape is
// that machine, the reference). Gorgonia's traps are handled there once (a
// tape machine that is not Reset before RunAll silently does nothing; a
// node's value can be overwritten later in the same run by in-place ops, so
// values are read through gorgonia.Read). What Run returns is borrowed:
// the program's own tensors, valid until its next Run; Result.Clone copies
// them. Every op of a program runs guarded: a panicking op — the user's or
// one of the symbolic backward — is an error of Run naming the node
// (OpPanic).
//
// Running a plan stage by stage — forwards 0..P−1, then backwards P−1..0,
// summing the gradients of an activation that several stages consume — gives
// the cost and learnable gradients of the whole graph; the package tests show
// it for MLPs, CNNs with BatchNorm and MaxPool, residual networks and an
// attention block, for every P, in float32 and float64.
//
// # Shared learnables
//
// A learnable read by ops in several stages — a tied embedding read by the
// first and the last layer, a recurrence's weights read at every time step,
// a weight penalty in the cost — does not keep the ops between its readers
// in one stage: every stage that reads it has it among its Learnables, and
// Plan.Shared (Stage.Shared per learnable) records the readers and the
// owner, the first reader. Each reader's Train program returns its
// contribution to the learnable's gradient; their sum is the gradient of
// the whole graph (the package tests show it, for every P, on a tied
// decoder, an unrolled GRU and an L2 penalty).
//
// A runtime training such a plan keeps one learnable: it sums the readers'
// contributions for a minibatch before the update, and every reader's
// forward of a microbatch reads the same version of the weights. All
// replicas are bound to the user's tensor by default, which is right when
// the stages run one after the other; running them concurrently, the owner
// updates the user's tensor in place, so every other reader binds a tensor
// of its own (Program.BindLearnables) and receives the owner's values.
//
// Plans are built once and owned by one goroutine per stage afterwards: a
// Program is not safe for concurrent use, but different stages' Programs may
// run in different goroutines at the same time, as long as no stage updates
// a tensor another stage's program is bound to.
package graphsplit
