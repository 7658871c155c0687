package graphsplit

import (
	"slices"

	"github.com/pipemare/pipemare/schedule"
)

// Link is the traffic between a stage and one other stage of a plan: the
// tensors the producer sends the consumer at each forward (and gets the
// gradients of at each backward), by key, in the producer's Outputs order.
type Link struct {
	Peer int
	Keys []int64
}

// Links returns the links of stage i: from its producers (activations in,
// gradients out) and to its consumers (activations out, gradients in), each
// in increasing stage order — the order gradients of a tensor read by
// several stages are summed in.
func (p *Plan) Links(i int) (producers, consumers []Link) {
	for _, st := range p.Stages {
		for _, c := range p.Stages[st.Index+1:] {
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
				producers = append(producers, Link{st.Index, keys})
			case st.Index == i:
				consumers = append(consumers, Link{c.Index, keys})
			}
		}
	}
	return producers, consumers
}

// Topology is which stages of the plan exchange tensors and which own the
// learnables others replicate: what a driver needs to know which actions can
// run, and a transport which links to open.
func (p *Plan) Topology() schedule.Topology {
	n := len(p.Stages)
	t := schedule.Topology{Producers: make([][]int, n), Consumers: make([][]int, n)}
	for i := range p.Stages {
		prod, cons := p.Links(i)
		for _, l := range prod {
			t.Producers[i] = append(t.Producers[i], l.Peer)
		}
		for _, l := range cons {
			t.Consumers[i] = append(t.Consumers[i], l.Peer)
		}
	}
	if len(p.Shared) > 0 {
		t.Owners, t.Replicas = make([][]int, n), make([][]int, n)
		for i := range p.Stages {
			t.Owners[i] = p.Owners(i)
			for _, sh := range p.Shared {
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

// Owners are the stages that own a learnable stage i replicates, ascending:
// the order of a Work's shared versions.
func (p *Plan) Owners(i int) []int {
	var out []int
	for _, sh := range p.Shared {
		if sh.Owner != i && slices.Contains(sh.Readers, i) && !slices.Contains(out, sh.Owner) {
			out = append(out, sh.Owner)
		}
	}
	slices.Sort(out)
	return out
}
