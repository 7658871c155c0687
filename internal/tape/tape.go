package tape

import (
	"github.com/pipemare/pipemare/internal/reach"
	"gorgonia.org/gorgonia"
)

// Machine is a gorgonia tape machine whose RunAll runs on the caller's
// goroutine: the program's fallback, and its reference (RunTape).
// Everything else is the tape machine's (Reset, Close, …). A Machine is
// used by one goroutine at a time, as a tape machine is.
//
// gorgonia's TapeMachine.RunAll locks its caller to an OS thread, starts a
// goroutine that executes the tape and waits for it on channels: per run a
// new goroutine whose stack grows again, and two thread hand-offs. Machine
// executes the same instructions, in the same order, with the same
// per-instruction checks, on the caller's goroutine: the results are the
// same bits (TestMachineComputesWhatRunAllComputes). It reaches the tape's
// executor through package reach, which ties it to reach.Version; with any
// other release, or a machine it does not know how to run, it falls back
// to RunAll: slower, never different.
type Machine struct {
	gorgonia.VM
	tape   *reach.Tape  // nil: RunAll is the tape machine's
	doWork func() error // the machine's ExternMetadata.DoWork
	errs   chan error
	done   chan struct{}
}

// New compiles g into a tape machine, as gorgonia.NewTapeMachine(g) does,
// or with gorgonia.EvalMode() when eval is set; it panics where that panics.
// (Options that bind dual values are not offered: RunAll runs their
// closures after the tape, and Machine would have to as well.)
func New(g *gorgonia.ExprGraph, eval bool) *Machine {
	var vm gorgonia.VM
	if eval {
		vm = gorgonia.NewTapeMachine(g, gorgonia.EvalMode())
	} else {
		vm = gorgonia.NewTapeMachine(g)
	}
	m := &Machine{VM: vm}
	ext, ok := vm.(interface {
		DoWork() error
		WorkAvailable() <-chan bool
	})
	// A machine with batched work (a cgo BLAS or CUDA build) hands it to
	// RunAll's loop while the tape runs: only RunAll can run it.
	if !ok || ext.WorkAvailable() != nil || gorgonia.CUDA {
		return m
	}
	t, err := reach.TapeOf(vm)
	if err != nil {
		return m
	}
	m.tape = &t
	m.doWork = ext.DoWork
	m.errs = make(chan error, 1)
	m.done = make(chan struct{}, 1)
	return m
}

// RunAll executes the program from the machine's position (Reset first to
// run it again) and returns the first instruction's error, as the tape
// machine's RunAll does. A panic in an op reaches the caller, where RunAll's
// goroutine would have ended the process.
func (m *Machine) RunAll() error {
	if m.tape == nil {
		return m.VM.RunAll()
	}
	m.tape.RunAll(m.errs, m.done)
	select {
	case err := <-m.errs:
		_ = m.doWork() // RunAll flushes too, and reports the tape's error
		return err
	case <-m.done:
	}
	return m.doWork()
}

// Direct reports whether Machines run the tape on the caller's goroutine:
// whether the binary links the gorgonia release package reach reads
// (reach.Check).
func Direct() bool { return reach.Check() == nil }
