// Package recycle keeps the process's spare tensors for reuse: the
// activations and gradients stages send each other, and the activations a
// stage keeps between a microbatch's forward and backward.
//
// Ownership is explicit. Get hands out a tensor the caller owns; the owner
// either gives it away (a message's tensors belong to its receiver once
// sent) or, when nobody reads it any more, returns it with Put. A tensor is
// Put once, by its last owner, and never touched after: two owners, or a
// Put of a tensor someone still reads, is a bug that Debug catches.
//
// The pools are process-wide and safe for concurrent use: with the
// in-process transport a tensor one stage took is returned by another.
// A network transport takes the tensors it decodes into from Get and
// returns a sent tensor with Put once its frame is written. A tensor the
// shared-memory transport reads in place lies in its ring: it is lent
// (Lend), and Put gives it back to the ring instead of the pools.
package recycle

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// key is what tensors are pooled by: dtype and number of elements (Get
// reshapes).
type key struct {
	dt tensor.Dtype
	n  int
}

var (
	mu    sync.RWMutex
	pools = map[key]*sync.Pool{}
)

func pool(k key) *sync.Pool {
	mu.RLock()
	p := pools[k]
	mu.RUnlock()
	if p != nil {
		return p
	}
	mu.Lock()
	defer mu.Unlock()
	if p = pools[k]; p == nil {
		p = &sync.Pool{}
		pools[k] = p
	}
	return p
}

// Get returns a dense tensor of dtype dt and the given shape that the caller
// owns. Its elements are unspecified (a recycled tensor's old values, or NaN
// under Debug): the caller writes every one before reading.
func Get(dt tensor.Dtype, shape tensor.Shape) *tensor.Dense {
	k := key{dt, shape.TotalSize()}
	t, ok := debug.get(k)
	if !ok {
		t, ok = pool(k).Get().(*tensor.Dense)
	}
	if ok {
		if slices.Equal(t.Shape(), shape) || t.Reshape(shape...) == nil {
			return t
		}
	}
	return tensor.New(tensor.Of(dt), tensor.WithShape(shape.Clone()...))
}

// Put returns v to the pools: its owner no longer needs it, and nobody else
// holds it. A lent tensor goes back to its lender (Lend). Values Get
// cannot hand out again (scalars, views, nil) are left to the garbage
// collector.
func Put(v gorgonia.Value) {
	t, ok := v.(*tensor.Dense)
	if ok && giveBack(t) {
		return
	}
	if !ok || t.IsView() || t.RequiresIterator() || t.Shape().TotalSize() == 0 {
		return
	}
	k := key{t.Dtype(), t.Shape().TotalSize()}
	if !debug.put(k, t) {
		pool(k).Put(t)
	}
}

// Copy returns a copy of v that the caller owns: a recycled tensor for a
// tensor, a clone for a scalar; nil for nil.
func Copy(v gorgonia.Value) (gorgonia.Value, error) {
	t, ok := v.(tensor.Tensor)
	if !ok {
		if v == nil {
			return nil, nil
		}
		return gorgonia.CloneValue(v)
	}
	c := Get(t.Dtype(), t.Shape())
	if err := tensorutil.CopyInto(c, t); err != nil {
		Put(c)
		return nil, errors.Wrap(err, "recycle: copying a tensor")
	}
	return c, nil
}

// Debug, on, poisons every tensor Put (NaN, or the largest value for
// integers), checks at Get that nothing wrote it while it was pooled, and
// panics on a second Put of a tensor that is already pooled. The pooled
// tensors are then kept apart from the pools, last Put first Got, so that
// a test sees the same hand-outs every run. Tests turn it on; it costs a
// pass over each recycled tensor. Off, it forgets what it kept.
func Debug(on bool) {
	debug.mu.Lock()
	defer debug.mu.Unlock()
	debug.on = on
	debug.free, debug.pooled = nil, nil
	if on {
		debug.free, debug.pooled = map[key][]*tensor.Dense{}, map[*tensor.Dense]bool{}
	}
}

var debug tracker

// tracker is Debug's pool.
type tracker struct {
	mu     sync.Mutex
	on     bool
	free   map[key][]*tensor.Dense
	pooled map[*tensor.Dense]bool
}

// put pools t, if Debug is on.
func (d *tracker) put(k key, t *tensor.Dense) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.on {
		return false
	}
	if d.pooled[t] {
		panic(fmt.Sprintf("recycle: a %v %v tensor was Put twice", t.Shape(), t.Dtype()))
	}
	d.pooled[t] = true
	d.free[k] = append(d.free[k], t)
	poison(t)
	return true
}

// get takes a tensor of key k from the pool, if Debug is on and has one.
func (d *tracker) get(k key) (*tensor.Dense, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.on || len(d.free[k]) == 0 {
		return nil, false
	}
	q := d.free[k]
	t := q[len(q)-1]
	d.free[k] = q[:len(q)-1]
	delete(d.pooled, t)
	if !poisoned(t) {
		panic(fmt.Sprintf("recycle: a %v %v tensor was written after it was Put", t.Shape(), t.Dtype()))
	}
	return t, true
}

func poison(t *tensor.Dense) {
	switch d := t.Data().(type) {
	case []float32:
		nan := float32(math.NaN())
		for i := range d {
			d[i] = nan
		}
	case []float64:
		for i := range d {
			d[i] = math.NaN()
		}
	case []int:
		for i := range d {
			d[i] = math.MaxInt
		}
	}
}

func poisoned(t *tensor.Dense) bool {
	switch d := t.Data().(type) {
	case []float32:
		for _, x := range d {
			if x == x {
				return false
			}
		}
	case []float64:
		for _, x := range d {
			if x == x {
				return false
			}
		}
	case []int:
		for _, x := range d {
			if x != math.MaxInt {
				return false
			}
		}
	}
	return true
}
