package tape

import (
	"github.com/pipemare/pipemare/internal/reach"
	"gorgonia.org/gorgonia"
)

// instr is one instruction of a compiled tape program (reach.Instr): the
// kind and the fields Program needs.
type instr struct {
	kind     instrKind
	node     int64           // the node an arg or op instruction is for
	op       gorgonia.Op     // exec
	reads    []int           // exec: CPU registers read, in argument order; read: one
	write    int             // arg, exec: the CPU register written
	prealloc bool            // exec: the compiler allocated its output (an extern call)
	into     *gorgonia.Value // read: gorgonia.Read's target
}

type instrKind int

const (
	instrNone = instrKind(reach.InstrNone) // alloc, free, flush: nothing for Program to do
	instrArg  = instrKind(reach.InstrArg)  // loadArg: a bound value into a register
	instrExec = instrKind(reach.InstrExec) // execOp: an op
	instrRead = instrKind(reach.InstrRead) // readInstr: gorgonia.Read
)

// program reads the instructions of the tape machine vm (reach.Program).
func program(vm gorgonia.VM) ([]instr, error) {
	code, err := reach.Program(vm)
	if err != nil {
		return nil, err
	}
	out := make([]instr, len(code))
	for i, in := range code {
		out[i] = instr{kind: instrKind(in.Kind), node: in.Node, op: in.Op, reads: in.Reads, write: in.Write, prealloc: in.Prealloc, into: in.Into}
	}
	return out, nil
}
