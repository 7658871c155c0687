package tape

import (
	"reflect"
	"unsafe"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// instr is one instruction of a compiled tape program, as this package
// reads it (knownVersion's layout): the kind and the fields Program needs.
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
	instrNone instrKind = iota // alloc, free, flush: nothing for Program to do
	instrArg                   // loadArg: a bound value into a register
	instrExec                  // execOp: an op
	instrRead                  // readInstr: gorgonia.Read
)

// program reads the instructions of the tape machine vm (a
// *gorgonia.tapeMachine of knownVersion) through reflection. It fails on
// anything it does not know: an instruction Program cannot run (a let
// statement, a device transfer), a register off the CPU, a field that is not
// where knownVersion has it.
func program(vm gorgonia.VM) (out []instr, err error) {
	defer func() {
		if r := recover(); r != nil { // a layout that is not knownVersion's
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

func readInstr(v reflect.Value) (instr, error) {
	var in instr
	var err error
	switch v.Type().String() {
	case "gorgonia.alloc", "gorgonia.free", "gorgonia.flushInstr":
		return in, nil
	case "gorgonia.loadArg":
		in.kind = instrArg
		if in.node, err = intField(v, "index"); err != nil {
			return in, err
		}
		in.write, err = cpuRegister(v, "writeTo")
		return in, err
	case "*gorgonia.execOp":
		in.kind = instrExec
		if in.node, err = intField(v, "id"); err != nil {
			return in, err
		}
		op, err := field(v, "op")
		if err != nil {
			return in, err
		}
		var ok bool
		if in.op, ok = op.Interface().(gorgonia.Op); !ok {
			return in, errors.Errorf("op field holds %v", op.Type())
		}
		if in.write, err = cpuRegister(v, "writeTo"); err != nil {
			return in, err
		}
		if in.reads, err = cpuRegisters(v, "readFrom"); err != nil {
			return in, err
		}
		pre, err := field(v, "preAllocated")
		if err != nil {
			return in, err
		}
		in.prealloc = pre.Bool()
		return in, nil
	case "*gorgonia.readInstr":
		in.kind = instrRead
		r, err := cpuRegister(v, "readFrom")
		if err != nil {
			return in, err
		}
		in.reads = []int{r}
		into, err := field(v, "into")
		if err != nil {
			return in, err
		}
		var ok bool
		if in.into, ok = into.Interface().(*gorgonia.Value); !ok {
			return in, errors.Errorf("into field holds %v", into.Type())
		}
		return in, nil
	}
	return in, errors.New("the executor does not run this instruction")
}

// field returns the named field of struct v (or of what pointer v points
// to), readable even though it is unexported.
func field(v reflect.Value, name string) (reflect.Value, error) {
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, errors.Errorf("%v is not a struct", v.Type())
	}
	if !v.CanAddr() {
		c := reflect.New(v.Type()).Elem()
		c.Set(v)
		v = c
	}
	f := v.FieldByName(name)
	if !f.IsValid() {
		return reflect.Value{}, errors.Errorf("%v has no field %s", v.Type(), name)
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), nil
}

func intField(v reflect.Value, name string) (int64, error) {
	f, err := field(v, name)
	if err != nil {
		return 0, err
	}
	if f.Kind() != reflect.Int64 && f.Kind() != reflect.Int {
		return 0, errors.Errorf("field %s is %v", name, f.Type())
	}
	return f.Int(), nil
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
