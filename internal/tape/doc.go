// Package tape runs the graphs of stage programs (graphsplit.Program) and
// of the zoo's evaluation (train.Evaluator): compiled once by gorgonia's own
// compiler, run many times by an executor of this package on the caller's
// goroutine, bit for bit what gorgonia's tape machine computes.
//
// # Compiling
//
// Compile builds gorgonia's tape machine for the graph, as
// gorgonia.NewTapeMachine does (which tells TrainModeOps their mode and
// puts the bound values on gorgonia's engine), and reads its instructions:
// the ops in the compiler's order (gorgonia.Sort reversed, duplicates
// merged), the registers each reads and writes, the outputs the compiler
// allocates (extern calls), the targets of gorgonia.Read. The instructions
// are read by reflection from the release the package was written against
// (reach.Version); Executor reports whether the executor runs the program
// and, if not, why.
//
// # Running
//
// Run executes the ops in order on the caller's goroutine. Each op's
// output is a buffer the program owns, allocated once and reused from run
// to run:
//
//   - an op whose output the compiler allocates (a matrix product, a
//     repeat) is called with UsePreallocDo on a zeroed buffer of its node's
//     static shape, as the tape machine calls it; the buffer is reused,
//     and zeroed again at every run only for an op whose result depends on
//     what it held (an increment into it, found at the first run);
//   - any other op runs through Do at its first two runs. Its result is
//     then a view (it shares an input's memory, or is the same memory at
//     both runs: a constant), which costs nothing and is re-run; or it is
//     fresh memory, and the op writes into a buffer of the program's from
//     the third run on: through UsePreallocDo, or for an op that overwrites
//     an input, UnsafeDo on a copy of that input. A buffer is adopted only
//     after a trial run into a buffer full of junk gave Do's bits — or
//     without one for a FullWriter, which promises it (this repository's
//     stage ops, whose statistics update must run once per run);
//   - the rest run through Do at every run, as the tape machine runs them,
//     allocating their output (Fallbacks lists them, with why): gorgonia's
//     ops that keep state between runs (BatchNorm, MaxPool, GroupNorm,
//     AvgPool and their gradients, dropout, random ops), ops with no
//     variant that writes into a given buffer (gorgonia's sum, transpose,
//     slice, concat), scalar results.
//
// An op that no gorgonia.Read target depends on is not run at all
// (Pruned lists them): gorgonia's symbolic backward differentiates every
// operand, the data's too, and nothing reads those gradients. Ops with an
// effect beyond their result run anyway: gorgonia's stateful ops, and
// Effectful ones (a BatchNorm's statistics, which update its running
// statistics). RunTape runs every op.
//
// No op writes a bound value: inputs are read as they are, never copied
// (some of gorgonia's ops transpose an input's header for the time they
// run, so no other goroutine may use a bound tensor during Run). The
// targets of gorgonia.Read receive the program's own values, not clones:
// they are borrowed until the next Run or Close, and must not be modified.
// Op nodes' own values (Node.Value) are not updated: read values through
// gorgonia.Read. An op's error is returned naming its node; a panic
// reaches the caller.
//
// # Falling back
//
// Where the executor cannot run a program — another gorgonia release, a
// machine with batched BLAS work (cgo BLAS, CUDA), an instruction it does
// not know (a let statement, a device transfer) — Run runs gorgonia's tape
// machine (Machine, on the caller's goroutine where it can), and the Read
// targets receive clones. RunTape runs that machine on any program: the
// reference the executor is tested against.
package tape
