package stage

import (
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pipemare/pipemare/transport"
	"gorgonia.org/gorgonia"
)

// held are tensors a stage holds, each marked with whether the stage owns
// it (internal/recycle): it took it from the pools, or received it in a
// message marked Own (transport.Message.Own: an Activation or Gradient, or
// over a network transport any message, whose tensors are the transport's
// copies, or lent from its shared memory). The others — the driver's data
// tensors in one process, which the driver sends every stage that reads
// them, the cost's gradient — are only read. Each owned tensor is returned
// to the pools (a lent one to its lender, recycle.Lend) once, by release,
// when nothing reads it any more.
type held struct {
	vals []gorgonia.Value
	own  []bool
}

func newHeld(n int) held {
	return held{vals: make([]gorgonia.Value, n), own: make([]bool, n)}
}

// release returns the owned tensors to the pools; o then owns none, so a
// second release (of o, or of a copy of o) returns nothing.
func (o held) release() {
	for i, v := range o.vals {
		if o.own[i] {
			o.own[i] = false
			recycle.Put(v)
		}
	}
}

// releaseInFlight returns what the stage still holds for microbatches in
// flight — their data, what their backward reads and the gradients it
// received, what their W reads —
// when Serve returns: nothing after a drained pipeline's Stop; after a
// failure, tensors lent from a transport's shared memory, which keeps
// that memory mapped until they are back (recycle.Lend).
func (r *Runtime) releaseInFlight() {
	for _, hs := range []map[int]held{r.data, r.kept, r.grads, r.eval.data} {
		for m, h := range hs {
			h.release()
			delete(hs, m)
		}
	}
	for m, d := range r.deferred {
		d.vals.release()
		delete(r.deferred, m)
	}
}

// received holds a message's values, owned when the message is.
func received(m transport.Message) held {
	h := newHeld(len(m.Values))
	copy(h.vals, m.Values)
	for i := range h.own {
		h.own[i] = m.Own
	}
	return h
}

// take moves the value at i out of o: o no longer releases it.
func (o held) take(i int) (gorgonia.Value, bool) {
	v, own := o.vals[i], o.own[i]
	o.own[i] = false
	return v, own
}

// index is the position of v in o (the same tensor), or −1.
func (o held) index(v gorgonia.Value) int {
	for i, x := range o.vals {
		if x != nil && x == v {
			return i
		}
	}
	return -1
}

// sharedData reports, for each of stage i's inputs, whether it is a data
// input that another stage reads too: the driver sends them all the same
// tensor, which stage i must copy before its program runs on it (an op may
// transpose an input's header for the time it runs).
func sharedData(plan *graphsplit.Plan, i int) []bool {
	shared := SharedFeeds(plan)
	mine := DataInputs(plan, i)
	out := make([]bool, len(plan.Stages[i].Inputs))
	d := 0
	for k, in := range plan.Stages[i].Inputs {
		if in.Kind == graphsplit.Data {
			out[k] = shared[mine[d]]
			d++
		}
	}
	return out
}
