package asyncvm

import (
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/schedule"
	"gorgonia.org/gorgonia"
)

// link carries one direction of traffic between two stages: activations of
// the producer's outputs down to a consumer at F(m), or their gradients back
// up at B(m). Messages arrive in microbatch order on both ends, since every
// stage runs its forwards and its backwards in increasing microbatch order.
type link struct {
	from, to int
	// keys are the original node IDs carried, in the producer's Outputs
	// order.
	keys []int64
	ch   chan message
}

// message is the tensors of one microbatch on a link, parallel to its keys.
// A gradient may be nil (no gradient path in the consumer).
type message struct {
	micro int
	vals  []gorgonia.Value
}

// buildLinks makes one activation link and one gradient link per pair of
// stages that exchange tensors, each buffered for capacity messages (the
// most microbatches a stage holds, so no send ever waits for long), and the
// topology they form.
func buildLinks(plan *graphsplit.Plan, capacity int) (schedule.Topology, []*link) {
	p := len(plan.Stages)
	topo := schedule.Topology{Producers: make([][]int, p), Consumers: make([][]int, p)}
	var links []*link
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
			if len(keys) == 0 {
				continue
			}
			topo.Consumers[st.Index] = append(topo.Consumers[st.Index], c.Index)
			topo.Producers[c.Index] = append(topo.Producers[c.Index], st.Index)
			links = append(links,
				&link{from: st.Index, to: c.Index, keys: keys, ch: make(chan message, capacity)},
				&link{from: c.Index, to: st.Index, keys: keys, ch: make(chan message, capacity)})
		}
	}
	return topo, links
}

// feedIndex is the position of node in plan.Feeds, or −1.
func feedIndex(plan *graphsplit.Plan, node *gorgonia.Node) int {
	for i, f := range plan.Feeds {
		if f.Node == node {
			return i
		}
	}
	return -1
}
