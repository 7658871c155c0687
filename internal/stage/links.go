package stage

import (
	"slices"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/schedule"
)

// link is the traffic between a stage and one other stage: the tensors the
// producer sends the consumer at each forward (and gets the gradients of at
// each backward), by key, in the producer's Outputs order.
type link struct {
	peer int
	keys []int64
}

// links returns the links of stage i: from its producers (activations in,
// gradients out) and to its consumers (activations out, gradients in), each
// in increasing stage order — the order gradients of a tensor read by
// several stages are summed in.
func links(plan *graphsplit.Plan, i int) (producers, consumers []link) {
	for _, st := range plan.Stages {
		for _, c := range plan.Stages[st.Index+1:] {
			var keys []int64
			for _, o := range st.Outputs {
				for _, cons := range o.Consumers {
					if cons == c.Index {
						keys = append(keys, o.Key)
					}
				}
			}
			switch {
			case len(keys) == 0:
			case c.Index == i:
				producers = append(producers, link{st.Index, keys})
			case st.Index == i:
				consumers = append(consumers, link{c.Index, keys})
			}
		}
	}
	return producers, consumers
}

// Topology is which stages of plan exchange tensors: what a driver needs to
// know which actions can run.
func Topology(plan *graphsplit.Plan) schedule.Topology {
	p := len(plan.Stages)
	t := schedule.Topology{Producers: make([][]int, p), Consumers: make([][]int, p)}
	for i := range plan.Stages {
		prod, cons := links(plan, i)
		for _, l := range prod {
			t.Producers[i] = append(t.Producers[i], l.peer)
		}
		for _, l := range cons {
			t.Consumers[i] = append(t.Consumers[i], l.peer)
		}
	}
	if len(plan.Shared) > 0 {
		t.Owners, t.Replicas = make([][]int, p), make([][]int, p)
		for i := range plan.Stages {
			t.Owners[i] = Owners(plan, i)
			for _, sh := range plan.Shared {
				if sh.Owner == i {
					for _, r := range sh.Replicas() {
						if !slices.Contains(t.Replicas[i], r) {
							t.Replicas[i] = append(t.Replicas[i], r)
						}
					}
				}
			}
			slices.Sort(t.Replicas[i])
		}
	}
	return t
}

// Owners are the stages that own a learnable stage i of plan replicates,
// ascending: the order of a Work's shared versions.
func Owners(plan *graphsplit.Plan, i int) []int {
	var out []int
	for _, sh := range plan.Shared {
		if sh.Owner != i && slices.Contains(sh.Readers, i) && !slices.Contains(out, sh.Owner) {
			out = append(out, sh.Owner)
		}
	}
	slices.Sort(out)
	return out
}

// DataInputs is the position in plan.Feeds of each of stage i's data
// inputs, in the order of its Inputs: the order of a Data message's Values.
func DataInputs(plan *graphsplit.Plan, i int) []int {
	var out []int
	for _, in := range plan.Stages[i].Inputs {
		if in.Kind != graphsplit.Data {
			continue
		}
		for fi, f := range plan.Feeds {
			if f.Key == in.Key {
				out = append(out, fi)
			}
		}
	}
	return out
}
