// Package tape runs a gorgonia tape machine's program on the goroutine that
// asks for it.
//
// gorgonia's TapeMachine.RunAll locks its caller to an OS thread, starts a
// goroutine that executes the tape and waits for it on channels: per run a
// new goroutine whose stack grows again, and two thread hand-offs. A stage
// program of a fine-grained pipeline is a handful of small ops, so that
// wrapping cost a third of a Transformer run's CPU time. Machine executes
// the same instructions, in the same order, with the same per-instruction
// checks, on the caller's goroutine: the results are the same bits
// (TestMachineComputesWhatRunAllComputes).
//
// It reaches the tape's executor by its linker name, which ties it to the
// gorgonia release it was read from (knownVersion). With any other release,
// or a machine it does not know how to run, Machine falls back to RunAll:
// slower, never different.
package tape
