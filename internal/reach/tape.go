package reach

import (
	"unsafe"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// runall is Version's func (m *tapeMachine) runall(errChan chan error,
// doneChan chan struct{}), which executes the program from the machine's
// pc and ends by sending exactly one value on one of the two channels.
//
//go:linkname runall gorgonia.org/gorgonia.(*tapeMachine).runall
func runall(m unsafe.Pointer, errChan chan error, doneChan chan struct{})

// Tape is a Gorgonia tape machine whose program runs on the caller's
// goroutine (RunAll).
type Tape struct{ m unsafe.Pointer }

// TapeOf returns the tape machine vm is. It fails behind the version gate,
// and for a VM that is not a *gorgonia.tapeMachine.
func TapeOf(vm gorgonia.VM) (Tape, error) {
	if err := Check(); err != nil {
		return Tape{}, err
	}
	if TypeString(vm) != "*gorgonia.tapeMachine" {
		return Tape{}, errors.Errorf("%T is not a tape machine", vm)
	}
	return Tape{m: (*[2]unsafe.Pointer)(unsafe.Pointer(&vm))[1]}, nil // the interface's data word
}

// RunAll executes the machine's program from its position, on the
// caller's goroutine, and sends exactly one value: the first
// instruction's error on errs, or an empty struct on done.
func (t Tape) RunAll(errs chan error, done chan struct{}) { runall(t.m, errs, done) }
