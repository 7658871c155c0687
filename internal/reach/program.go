package reach

import (
	"reflect"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// Instr is one instruction of a compiled tape program, as this package
// reads it (Version's layout): the kind and the fields an executor needs.
type Instr struct {
	Kind     InstrKind
	Node     int64           // the node an arg or op instruction is for
	Op       gorgonia.Op     // exec
	Reads    []int           // exec: CPU registers read, in argument order; read: one
	Write    int             // arg, exec: the CPU register written
	Prealloc bool            // exec: the compiler allocated its output (an extern call)
	Into     *gorgonia.Value // read: gorgonia.Read's target
}

// InstrKind is what an instruction does.
type InstrKind int

// The kinds of instruction.
const (
	InstrNone InstrKind = iota // alloc, free, flush: nothing for an executor to do
	InstrArg                   // loadArg: a bound value into a register
	InstrExec                  // execOp: an op
	InstrRead                  // readInstr: gorgonia.Read
)

// Program reads the instructions of the tape machine vm (a
// *gorgonia.tapeMachine of Version) through reflection. It fails behind the
// version gate, and on anything it does not know: an instruction an
// executor cannot run (a let statement, a device transfer), a register off
// the CPU, a field that is not where Version has it.
func Program(vm gorgonia.VM) (out []Instr, err error) {
	if err := Check(); err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil { // a layout that is not Version's
			out, err = nil, errors.Errorf("reading the tape machine's program: %v", r)
		}
	}()
	m := reflect.ValueOf(vm)
	if m.Kind() != reflect.Pointer || m.Type().String() != "*gorgonia.tapeMachine" {
		return nil, errors.Errorf("%T is not a tape machine", vm)
	}
	prog, err := field(m, "p")
	if err != nil {
		return nil, err
	}
	code, err := field(prog, "instructions")
	if err != nil {
		return nil, err
	}
	for i := 0; i < code.Len(); i++ {
		v := code.Index(i).Elem() // the tapeInstr's dynamic value
		in, err := readInstr(v)
		if err != nil {
			return nil, errors.Wrapf(err, "instruction %d (%v)", i, v.Type())
		}
		out = append(out, in)
	}
	return out, nil
}

func readInstr(v reflect.Value) (Instr, error) {
	var in Instr
	var err error
	switch v.Type().String() {
	case "gorgonia.alloc", "gorgonia.free", "gorgonia.flushInstr":
		return in, nil
	case "gorgonia.loadArg":
		in.Kind = InstrArg
		if in.Node, err = intField(v, "index"); err != nil {
			return in, err
		}
		in.Write, err = cpuRegister(v, "writeTo")
		return in, err
	case "*gorgonia.execOp":
		in.Kind = InstrExec
		if in.Node, err = intField(v, "id"); err != nil {
			return in, err
		}
		op, err := field(v, "op")
		if err != nil {
			return in, err
		}
		var ok bool
		if in.Op, ok = op.Interface().(gorgonia.Op); !ok {
			return in, errors.Errorf("op field holds %v", op.Type())
		}
		if in.Write, err = cpuRegister(v, "writeTo"); err != nil {
			return in, err
		}
		if in.Reads, err = cpuRegisters(v, "readFrom"); err != nil {
			return in, err
		}
		pre, err := field(v, "preAllocated")
		if err != nil {
			return in, err
		}
		in.Prealloc = pre.Bool()
		return in, nil
	case "*gorgonia.readInstr":
		in.Kind = InstrRead
		r, err := cpuRegister(v, "readFrom")
		if err != nil {
			return in, err
		}
		in.Reads = []int{r}
		into, err := field(v, "into")
		if err != nil {
			return in, err
		}
		var ok bool
		if in.Into, ok = into.Interface().(*gorgonia.Value); !ok {
			return in, errors.Errorf("into field holds %v", into.Type())
		}
		return in, nil
	}
	return in, errors.New("the executor does not run this instruction")
}

func intField(v reflect.Value, name string) (int64, error) {
	f, err := field(v, name)
	if err != nil {
		return 0, err
	}
	i, err := intOf(f, name)
	return int64(i), err
}

// cpuRegister reads a register field {id int; device Device}: its id, if
// the register is on the CPU.
func cpuRegister(v reflect.Value, name string) (int, error) {
	f, err := field(v, name)
	if err != nil {
		return 0, err
	}
	return register(f)
}

func cpuRegisters(v reflect.Value, name string) ([]int, error) {
	f, err := field(v, name)
	if err != nil {
		return nil, err
	}
	if f.Kind() != reflect.Slice {
		return nil, errors.Errorf("field %s is %v", name, f.Type())
	}
	out := make([]int, f.Len())
	for i := range out {
		if out[i], err = register(f.Index(i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func register(r reflect.Value) (int, error) {
	id, err := intField(r, "id")
	if err != nil {
		return 0, err
	}
	dev, err := field(r, "device")
	if err != nil {
		return 0, err
	}
	if dev.Int() != int64(gorgonia.CPU) {
		return 0, errors.Errorf("register %d is on device %d", id, dev.Int())
	}
	return int(id), nil
}
