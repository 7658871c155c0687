// Package stageops holds the ops a pipeline stage runs in place of some of
// Gorgonia's own: the same arithmetic, in the same order, so the results are
// bit-identical with Gorgonia's default (pure Go) BLAS, but
//
//   - stateless: BatchNorm's batch statistics (with the scale and bias its
//     forward applied, so that its gradient reads the forward's ReLU mask
//     and scale when the weights changed in between, as gorgonia's kept
//     tensors do) and MaxPool's argmax are outputs of the forward that the
//     backward reads as inputs, instead of state kept in the op object
//     between its Do and the backward. A stage made of them can keep what
//     its backward needs per microbatch and skip the second forward pass
//     (graphsplit's keeping programs);
//   - fused: a BatchNorm with its broadcast scale and bias (and the ReLU that
//     follows) is one pass over the tensor instead of six; a convolution's
//     GEMM writes its output straight in NCHW instead of NHWC followed by a
//     transpose; im2col writes the matrix the GEMM reads instead of a 4-d
//     tensor that a reshape then copies;
//   - serial: SoftMax and its gradient compute their rows on the goroutine
//     that runs the op, where gorgonia's start a goroutine per row.
//
// graphsplit substitutes them when a stage re-applies the user's ops (the
// user's graph is never touched); nothing else calls them. Each op's doc
// comment names the Gorgonia op (or chain of ops) it replaces; the package
// tests compare forward values and gradients with Gorgonia's bit for bit.
//
// With another BLAS (gorgonia.Use; with the openblas build tag UseFastBLAS
// chooses OpenBLAS, see openblas.go) the
// GEMMs are that library's, which cuts and sums them in its own order:
// results then agree with Gorgonia's to float rounding, as any two BLAS do.
//
// The running statistics of a BatchNorm stay in the user's
// *gorgonia.BatchNormOp (read with Stats, saved and restored with SetStats
// as before); its momentum, epsilon and training mode are read from it at
// every run, so gorgonia's SetTraining on the user's op switches the stage
// ops too.
package stageops
