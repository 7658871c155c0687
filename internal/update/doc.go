// Package update holds the element-wise loops a solver step makes over
// every float32 learnable: momentum's velocity and weight update
// (solvers.Momentum), T2's velocity estimate and the weights it
// extrapolates (correction.Solver).
//
// Each loop runs eight elements at a time in AVX where the CPU has it
// (update_amd64.s) and one at a time otherwise and for the tail. The
// vector loop makes each element's operations in the scalar loop's order,
// each rounded to float32 alone (no fused multiply-add), so both give the
// same bits on every input, infinities and subnormals included, and a NaN
// wherever the other does. Which NaN x86 returns when both operands are
// NaNs depends on their order, which for the scalar loop is the
// compiler's choice; the engine stops at the first learnable that is not
// finite, so no NaN reaches the weights, and a recorded weights_sha256
// does not depend on the CPU. The scalar loops
// convert every product to float32 explicitly, which keeps the compiler
// from fusing them even where it may (GOAMD64=v3).
//
// Callers own the slices; a function writes only its first argument (and
// Momentum its first and third), reads the others, and requires them to be
// at least as long as the first.
package update
