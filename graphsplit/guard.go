package graphsplit

import (
	"fmt"
	"runtime/debug"

	"github.com/pipemare/pipemare/internal/tape"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// OpPanic is the cause of the error Program.Run returns when an op panicked.
// Every op of a stage program runs guarded: the error names the node, and
// where a program's tape runs in gorgonia's RunAll goroutine (internal/tape
// falls back to it with another gorgonia release) a panic would otherwise
// end the process.
type OpPanic struct {
	// Op is the op that panicked: the user's op, or an op of the symbolic
	// backward.
	Op gorgonia.Op
	// Where names the node: `node "h"` for an op of the user's graph,
	// `the backward pass (towards the gradient of node "h")` for an op the
	// symbolic backward added.
	Where string
	// Value is what the op panicked with; Stack is the stack of the tape's
	// goroutine at the panic.
	Value interface{}
	Stack []byte
}

func (e *OpPanic) Error() string {
	return fmt.Sprintf("op %v of %s panicked: %v", e.Op, e.Where, e.Value)
}

// guardedOp is an op of a stage program that turns a panic in the wrapped
// op into an error, recorded for Program.Run. It delegates everything else —
// type, shape, hash and string (by embedding gorgonia.Op), the preallocated
// and in-place variants and training mode — so the tape machine compiles the
// same program and computes the same bits. Where the wrapped op lacks a
// variant, the guard does what the tape machine does without one: Do.
//
// Guarded graphs are finished programs: they are compiled and run, never
// differentiated (a guard does not forward SymDiff).
type guardedOp struct {
	gorgonia.Op
	where  string
	caught *caught
}

// caught keeps the first panic of one Run of a program. The goroutine that
// runs the tape writes it before RunAll returns the op's error, and the
// program's goroutine reads it after.
type caught struct{ first *OpPanic }

func (op guardedOp) recover(err *error) {
	if r := recover(); r != nil {
		p := &OpPanic{Op: op.Op, Where: op.where, Value: r, Stack: debug.Stack()}
		if op.caught.first == nil {
			op.caught.first = p
		}
		*err = p
	}
}

func (op guardedOp) Do(vals ...gorgonia.Value) (v gorgonia.Value, err error) {
	defer op.recover(&err)
	return op.Op.Do(vals...)
}

func (op guardedOp) UsePreallocDo(prealloc gorgonia.Value, vals ...gorgonia.Value) (v gorgonia.Value, err error) {
	defer op.recover(&err)
	if pd, ok := op.Op.(gorgonia.UsePreallocDoer); ok {
		return pd.UsePreallocDo(prealloc, vals...)
	}
	return op.Op.Do(vals...)
}

func (op guardedOp) UnsafeDo(vals ...gorgonia.Value) (v gorgonia.Value, err error) {
	defer op.recover(&err)
	if ud, ok := op.Op.(gorgonia.UnsafeDoer); ok {
		return ud.UnsafeDo(vals...)
	}
	return op.Op.Do(vals...)
}

// Unwrap is the guarded op: the executor (internal/tape) decides how to run
// a guard by what the op it wraps offers.
func (op guardedOp) Unwrap() gorgonia.Op { return op.Op }

// SetTraining is called by every new tape machine (BatchNorm resets its
// running statistics there).
func (op guardedOp) SetTraining(training bool) error {
	if tm, ok := op.Op.(gorgonia.TrainModeOp); ok {
		return tm.SetTraining(training)
	}
	return nil
}

var (
	_ gorgonia.UsePreallocDoer = guardedOp{}
	_ gorgonia.UnsafeDoer      = guardedOp{}
	_ gorgonia.TrainModeOp     = guardedOp{}
	_ tape.Unwrapper           = guardedOp{}
)

// seal rebuilds a draft program's graph in a new graph named name, node for
// node in the same order, with every op guarded, and points the program at
// it. Inputs keep their names, types, shapes and bound values; constants are
// cloned; SizeOf nodes stay as they are (ops read them as dimensions while
// they are built). where names each op node of the draft for errors. With
// plain, the draft is kept as it is (the tests compare both).
func (p *Program) seal(name string, where map[*gorgonia.Node]string, plain bool) error {
	p.caught = &caught{}
	if plain {
		return nil
	}
	src := p.Graph.AllNodes()
	g := gorgonia.NewGraph(gorgonia.WithGraphName(name))
	to := make(map[*gorgonia.Node]*gorgonia.Node, len(src))
	for _, n := range src {
		var kids gorgonia.Nodes
		it := p.Graph.From(n.ID())
		for it != nil && it.Next() {
			k, ok := to[it.Node().(*gorgonia.Node)]
			if !ok {
				return errors.Errorf("graphsplit: %s: node %q comes before its input %q", name, n.Name(), it.Node().(*gorgonia.Node).Name())
			}
			kids = append(kids, k)
		}
		var l *gorgonia.Node
		var err error
		switch {
		case n.Op() == nil:
			opts := []gorgonia.NodeConsOpt{gorgonia.WithType(n.Type()), gorgonia.In(g), gorgonia.WithShape(n.Shape()...), gorgonia.WithName(n.Name())}
			if v := n.Value(); v != nil {
				opts = append(opts, gorgonia.WithValue(v))
			}
			l = gorgonia.NewUniqueNode(opts...)
		case isConstant(n):
			l = cloneConstant(n, g)
		case isSizeOf(n):
			l, err = gorgonia.ApplyOp(n.Op(), kids...)
		default:
			w := where[n]
			if w == "" {
				w = fmt.Sprintf("node %q of the %s program", n.Name(), p.kind)
			}
			l, err = gorgonia.ApplyOp(guardedOp{Op: n.Op(), where: w, caught: p.caught}, kids...)
		}
		if err != nil {
			return errors.Wrapf(err, "graphsplit: %s: guarding node %q", name, n.Name())
		}
		if !l.Shape().Eq(n.Shape()) {
			return errors.Errorf("graphsplit: %s: guarding node %q changed its shape from %v to %v", name, n.Name(), n.Shape(), l.Shape())
		}
		to[n] = l
	}
	if len(g.AllNodes()) != len(src) {
		return errors.Errorf("graphsplit: %s: guarding gave %d nodes for %d", name, len(g.AllNodes()), len(src))
	}
	for _, ns := range []gorgonia.Nodes{p.Inputs, p.Learnables, p.Outputs, p.OutputGrads, p.InputGrads, p.LearnableGrads, p.Kept, p.Probes} {
		for i, n := range ns {
			if n != nil {
				ns[i] = to[n]
			}
		}
	}
	for o, l := range p.local {
		p.local[o] = to[l]
	}
	for _, aux := range p.aux { // the stage ops' extra nodes (substitute.go)
		for i, l := range aux {
			aux[i] = to[l]
		}
	}
	p.Graph = g
	return nil
}

// origins names every op node of a draft program for errors: the original
// node it re-applies, or for an op of the symbolic backward the node whose
// gradient it computes towards (the nearest gradient node it feeds, through
// gorgonia's DerivOf).
func (p *Program) origins() map[*gorgonia.Node]string {
	orig := make(map[*gorgonia.Node]*gorgonia.Node, len(p.local))
	for o, l := range p.local {
		orig[l] = o
	}
	all := p.Graph.AllNodes()
	where := make(map[*gorgonia.Node]string, len(all))
	for i := len(all) - 1; i >= 0; i-- { // consumers first
		n := all[i]
		if o, ok := orig[n]; ok && i < p.fwdCount {
			where[n] = fmt.Sprintf("node %q", o.Name())
			continue
		}
		for _, f := range n.DerivOf() {
			if o, ok := orig[f]; ok {
				where[n] = fmt.Sprintf("the backward pass (towards the gradient of node %q)", o.Name())
				break
			}
		}
		if where[n] != "" {
			continue
		}
		it := p.Graph.To(n.ID())
		for it != nil && it.Next() {
			if w := where[it.Node().(*gorgonia.Node)]; w != "" && i >= p.fwdCount {
				where[n] = w
				break
			}
		}
		if where[n] == "" {
			where[n] = fmt.Sprintf("node %q of the %s program", n.Name(), p.kind)
		}
	}
	return where
}
