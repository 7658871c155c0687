package tape

import (
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"unsafe"

	"gorgonia.org/gorgonia"
)

// knownVersion is the gorgonia release whose (*tapeMachine).runall this
// package calls: func (m *tapeMachine) runall(errChan chan error, doneChan
// chan struct{}), which executes the program from the machine's pc and ends
// by sending exactly one value on one of the two channels.
const knownVersion = "v0.9.18"

//go:linkname runall gorgonia.org/gorgonia.(*tapeMachine).runall
func runall(m unsafe.Pointer, errChan chan error, doneChan chan struct{})

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
// executor by its linker name, which ties it to knownVersion; with any
// other release, or a machine it does not know how to run, it falls back
// to RunAll: slower, never different.
type Machine struct {
	gorgonia.VM
	tape   unsafe.Pointer // the *tapeMachine; nil: RunAll is the tape machine's
	doWork func() error   // the machine's ExternMetadata.DoWork
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
	if !ok || ext.WorkAvailable() != nil || gorgonia.CUDA || !Direct() || reflect.TypeOf(vm).String() != "*gorgonia.tapeMachine" {
		return m
	}
	m.tape = (*[2]unsafe.Pointer)(unsafe.Pointer(&vm))[1] // the interface's data word
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
	runall(m.tape, m.errs, m.done)
	select {
	case err := <-m.errs:
		_ = m.doWork() // RunAll flushes too, and reports the tape's error
		return err
	case <-m.done:
	}
	return m.doWork()
}

// Direct reports whether Machines run the tape on the caller's goroutine:
// whether the binary links the gorgonia release this package was read from.
// A program's build information names the release; a test binary's has no
// dependencies, so there the path of gorgonia's source file in the module
// cache does (a replaced or vendored copy without build information falls
// back to RunAll).
func Direct() bool {
	direct.once.Do(func() {
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, d := range info.Deps {
				if d.Path == "gorgonia.org/gorgonia" {
					direct.ok = d.Replace == nil && d.Version == knownVersion
					return
				}
			}
		}
		fn := runtime.FuncForPC(reflect.ValueOf(gorgonia.NewTapeMachine).Pointer())
		if fn == nil {
			return
		}
		file, _ := fn.FileLine(fn.Entry())
		direct.ok = strings.Contains(filepath.ToSlash(file), "gorgonia.org/gorgonia@"+knownVersion+"/")
	})
	return direct.ok
}

var direct struct {
	once sync.Once
	ok   bool
}
