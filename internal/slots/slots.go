// Package slots holds the weight-shaped tensors a solver keeps per
// learnable — a velocity, Adam's moments, T2's δ (TensorFlow calls them
// slot variables) — and saves and loads them as the tensors of a
// solvers.State, named "<slot>/<learnable index>".
//
// A Set is bound to its learnables' shapes and dtypes once, by the model
// of the solver's first Bind or Step, or by the first State it loads;
// afterwards every model and every State is checked against them.
package slots

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Set is a solver's slots: for each slot name, one tensor per learnable.
// It is used by one goroutine at a time (the stage's).
type Set struct {
	names  []string
	bound  bool
	model  bool // bound by a model (Bind), not only by a State
	shapes []tensor.Shape
	dtypes []tensor.Dtype
	t      [][]*tensor.Dense // t[k][i]: slot names[k] of learnable i
}

// New returns an unbound Set with the given slot names.
func New(names ...string) *Set { return &Set{names: names} }

// Key is the State tensor name of slot name of learnable i.
func Key(name string, i int) string { return name + "/" + strconv.Itoa(i) }

// Bound reports whether the Set knows its learnables.
func (s *Set) Bound() bool { return s.bound }

// Len is the number of learnables (0 while unbound).
func (s *Set) Len() int { return len(s.shapes) }

// Slot returns slot k (the index of its name in New) of learnable i.
func (s *Set) Slot(k, i int) *tensor.Dense { return s.t[k][i] }

// Bytes is the size of every slot tensor.
func (s *Set) Bytes() int64 {
	var n int64
	for _, ts := range s.t {
		for _, t := range ts {
			n += tensorutil.Bytes(t)
		}
	}
	return n
}

// Describe names learnable i of a model for errors: its node name when
// the ValueGrad has one.
func Describe(i int, vg gorgonia.ValueGrad) string {
	if n, ok := vg.(interface{ Name() string }); ok && n.Name() != "" {
		return fmt.Sprintf("learnable %d (%s)", i, n.Name())
	}
	return fmt.Sprintf("learnable %d", i)
}

// Bind binds an unbound Set to model's shapes and dtypes with zero slots,
// or checks that model matches a bound Set. Learnables must be float32 or
// float64 tensors or scalars.
func (s *Set) Bind(model []gorgonia.ValueGrad) error {
	if s.bound && len(model) != len(s.shapes) {
		return errors.Errorf("the solver was bound to %d learnables, now given %d; always pass the same list", len(s.shapes), len(model))
	}
	shapes := make([]tensor.Shape, len(model))
	dtypes := make([]tensor.Dtype, len(model))
	for i, vg := range model {
		v := vg.Value()
		if v == nil {
			return errors.Errorf("%s has no value", Describe(i, vg))
		}
		if dt := v.Dtype(); dt != tensor.Float32 && dt != tensor.Float64 {
			return errors.Errorf("%s is %v; the solvers take float32 and float64", Describe(i, vg), dt)
		}
		shapes[i], dtypes[i] = v.Shape(), v.Dtype()
		if s.bound && (!shapes[i].Eq(s.shapes[i]) || dtypes[i] != s.dtypes[i]) {
			return errors.Errorf("%s is %v %v; the solver was bound to %v %v; always pass the same list", Describe(i, vg), shapes[i], dtypes[i], s.shapes[i], s.dtypes[i])
		}
	}
	if !s.bound {
		s.allocate(shapes, dtypes)
	}
	s.model = true
	return nil
}

func (s *Set) allocate(shapes []tensor.Shape, dtypes []tensor.Dtype) {
	s.bound = true
	s.shapes, s.dtypes = make([]tensor.Shape, len(shapes)), dtypes
	s.t = make([][]*tensor.Dense, len(s.names))
	for i, sh := range shapes {
		s.shapes[i] = sh.Clone()
	}
	for k := range s.names {
		for i := range shapes {
			s.t[k] = append(s.t[k], tensorutil.Zeros(dtypes[i], s.shapes[i]))
		}
	}
}

// Save adds a copy of every slot to tensors (nothing while unbound).
func (s *Set) Save(tensors map[string]tensor.Tensor) error {
	if !s.bound {
		return nil
	}
	for k, name := range s.names {
		for i, t := range s.t[k] {
			c, err := tensorutil.Clone(t)
			if err != nil {
				return errors.Wrap(err, Key(name, i))
			}
			tensors[Key(name, i)] = c
		}
	}
	return nil
}

// Check returns the number of learnables a saved State's tensors cover,
// or why Load would refuse them; it changes nothing. They must hold every
// slot of every learnable ("<slot>/0" … "<slot>/n-1") and nothing else,
// with the bound shapes and dtypes — or no tensor at all. No tensor is
// either a solver that had not been bound (stepped false) or one that
// stepped a model of no learnables (stepped true: a pipeline stage that
// owns none), which a Set bound to learnables refuses.
func (s *Set) Check(tensors map[string]tensor.Tensor, stepped bool) (int, error) {
	n, _, _, err := s.check(tensors, stepped)
	return n, err
}

// check is Check, also returning the shapes and dtypes of the learnables.
func (s *Set) check(tensors map[string]tensor.Tensor, stepped bool) (int, []tensor.Shape, []tensor.Dtype, error) {
	if len(tensors) == 0 {
		if stepped && s.bound && len(s.shapes) > 0 {
			return 0, nil, nil, errors.Errorf("the state holds no slot (a solver that stepped no learnables), the solver has %d learnables", len(s.shapes))
		}
		return 0, nil, nil, nil
	}
	n, err := s.count(tensors)
	if err != nil {
		return 0, nil, nil, err
	}
	if s.bound && n != len(s.shapes) {
		return 0, nil, nil, errors.Errorf("the state has slots for %d learnables, the solver has %d", n, len(s.shapes))
	}
	shapes, dtypes := s.shapes, s.dtypes
	if !s.bound {
		shapes, dtypes = make([]tensor.Shape, n), make([]tensor.Dtype, n)
		for i := 0; i < n; i++ {
			t := tensors[Key(s.names[0], i)]
			if t == nil {
				return 0, nil, nil, errors.Errorf("%s is nil", Key(s.names[0], i))
			}
			shapes[i], dtypes[i] = t.Shape(), t.Dtype()
		}
	}
	for _, name := range s.names {
		for i := 0; i < n; i++ {
			t := tensors[Key(name, i)]
			if t == nil {
				return 0, nil, nil, errors.Errorf("%s is nil", Key(name, i))
			}
			if !t.Shape().Eq(shapes[i]) || t.Dtype() != dtypes[i] {
				return 0, nil, nil, errors.Errorf("%s is %v %v; learnable %d is %v %v", Key(name, i), t.Shape(), t.Dtype(), i, shapes[i], dtypes[i])
			}
		}
	}
	return n, shapes, dtypes, nil
}

// Load replaces the slots with the tensors of a saved State, which Check
// accepts; it checks everything before it changes anything, and returns
// the number of learnables the State covers. No tensor zeroes a Set bound
// to a model; of a Set that only a State bound, it unbinds it (stepped
// false: loading what an unbound Set saved gives it back as it was) or
// binds it to no learnables (stepped true).
func (s *Set) Load(tensors map[string]tensor.Tensor, stepped bool) (int, error) {
	n, shapes, dtypes, err := s.check(tensors, stepped)
	if err != nil {
		return 0, err
	}
	if len(tensors) == 0 {
		switch {
		case s.model:
			for _, ts := range s.t {
				for _, t := range ts {
					t.Zero()
				}
			}
		case stepped:
			*s = Set{names: s.names}
			s.allocate(nil, nil)
		default:
			*s = Set{names: s.names}
		}
		return 0, nil
	}
	if !s.bound {
		s.allocate(shapes, dtypes)
	}
	for k, name := range s.names {
		for i := 0; i < n; i++ {
			if err := tensorutil.CopyInto(s.t[k][i], tensors[Key(name, i)]); err != nil {
				return 0, errors.Wrap(err, Key(name, i)) // unreachable: checked above
			}
		}
	}
	return n, nil
}

// count checks that tensors are exactly the slots of n learnables and
// returns n.
func (s *Set) count(tensors map[string]tensor.Tensor) (int, error) {
	per := make(map[string][]int, len(s.names))
	for key := range tensors {
		slash := strings.LastIndexByte(key, '/')
		i, err := strconv.Atoi(key[slash+1:])
		name := key[:max(slash, 0)]
		if slash < 0 || err != nil || i < 0 || !s.has(name) {
			return 0, errors.Errorf("unexpected tensor %q (this solver keeps %s)", key, s.pattern())
		}
		per[name] = append(per[name], i)
	}
	n := -1
	for _, name := range s.names {
		idx := per[name]
		sort.Ints(idx)
		for j, i := range idx {
			if i != j {
				return 0, errors.Errorf("missing tensor %q", Key(name, j))
			}
		}
		switch {
		case n < 0:
			n = len(idx)
		case len(idx) < n:
			return 0, errors.Errorf("missing tensor %q", Key(name, len(idx)))
		case len(idx) > n:
			return 0, errors.Errorf("missing tensor %q", Key(s.names[0], n))
		}
	}
	return n, nil
}

func (s *Set) has(name string) bool {
	for _, n := range s.names {
		if n == name {
			return true
		}
	}
	return false
}

func (s *Set) pattern() string {
	var p []string
	for _, n := range s.names {
		p = append(p, fmt.Sprintf("%q", n+"/<i>"))
	}
	return strings.Join(p, " and ")
}
