package graphsplit

import (
	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// interpreter evaluates the original graph op by op with each op's Do on
// fresh copies of its inputs, so no op can overwrite a value another op still
// needs. It is slow and exact: tests use it as a reference that does not
// depend on the tape machine's memory reuse.
// BatchNorm running statistics are saved before the first Do and restored by
// restore, so evaluating leaves the model as it was.
type interpreter struct {
	a     *analysis
	vals  map[*gorgonia.Node]gorgonia.Value
	saved bnstate.Saved
}

func newInterpreter(a *analysis, feeds map[*gorgonia.Node]gorgonia.Value) (*interpreter, error) {
	in := &interpreter{a: a, vals: make(map[*gorgonia.Node]gorgonia.Value)}
	for _, f := range a.feeds {
		v, ok := feeds[f]
		if !ok {
			return nil, errors.Errorf("no value for data input %q", f.Name())
		}
		if err := checkValue(f, v); err != nil {
			return nil, errors.Wrapf(err, "data input %q", f.Name())
		}
		in.vals[f] = v
	}
	for l := range a.learn {
		in.vals[l] = l.Value()
	}
	return in, nil
}

// restore puts back the BatchNorm statistics the evaluation moved.
func (in *interpreter) restore() {
	in.saved.Restore()
	in.saved = nil
}

// eval returns n's value, evaluating what it needs first.
func (in *interpreter) eval(n *gorgonia.Node) (v gorgonia.Value, err error) {
	if v, ok := in.vals[n]; ok {
		return v, nil
	}
	if isConstant(n) {
		return n.Value(), nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = errors.Errorf("op %v of node %q panicked: %v", n.Op(), n.Name(), r)
		}
	}()
	kids := in.a.children(n)
	args := make([]gorgonia.Value, len(kids))
	for i, c := range kids {
		if args[i], err = in.eval(c); err != nil {
			return nil, err
		}
	}
	in.saved = append(in.saved, bnstate.Save(bnstate.Of(gorgonia.Nodes{n}))...)
	do := func() (gorgonia.Value, error) {
		fresh := make([]gorgonia.Value, len(args))
		for i, x := range args { // Do may reuse its inputs: give it copies
			c, err := gorgonia.CloneValue(x)
			if err != nil {
				return nil, err
			}
			fresh[i] = c
		}
		return n.Op().Do(fresh...)
	}
	if v, err = do(); err != nil {
		return nil, errors.Wrapf(err, "op %v of node %q failed", n.Op(), n.Name())
	}
	in.vals[n] = v
	return v, nil
}
