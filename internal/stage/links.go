package stage

import "github.com/pipemare/pipemare/graphsplit"

// link is graphsplit.Link as the runtime reads it.
type link struct {
	peer int
	keys []int64
}

// links returns the links of stage i (graphsplit.Plan.Links): from its
// producers and to its consumers, each in increasing stage order.
func links(plan *graphsplit.Plan, i int) (producers, consumers []link) {
	prod, cons := plan.Links(i)
	return runtimeLinks(prod), runtimeLinks(cons)
}

func runtimeLinks(ls []graphsplit.Link) []link {
	out := make([]link, 0, len(ls))
	for _, l := range ls {
		out = append(out, link{l.Peer, l.Keys})
	}
	return out
}

// SharedFeeds reports, for each of plan.Feeds, whether more than one
// stage reads it: the driver then sends them all the same tensor.
func SharedFeeds(plan *graphsplit.Plan) []bool {
	readers := make([]int, len(plan.Feeds))
	for s := range plan.Stages {
		for _, f := range DataInputs(plan, s) {
			readers[f]++
		}
	}
	out := make([]bool, len(readers))
	for f, n := range readers {
		out[f] = n > 1
	}
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
