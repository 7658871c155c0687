package schedule

// Topology says which stages exchange tensors: stage i reads activations
// from Producers[i] and sends its own to Consumers[i]; gradients flow back
// along the same pairs. Skip connections make it more than a chain.
//
// A learnable several stages read (tied weights) has an owner, its first
// reader, which updates it, and replicas: Owners[i] are the stages that own
// a learnable stage i reads a replica of, Replicas[i] the stages that read
// a replica of one stage i owns. A replica's forward of m reads the
// version its owner's forward of m read, so it comes after that forward;
// the owner's update k sums the replicas' gradients of step k, so it comes
// after their updates k. Both may be nil (no shared learnable).
type Topology struct {
	Producers, Consumers [][]int
	Owners, Replicas     [][]int
}

// Chain is the topology of p stages in a line.
func Chain(p int) Topology {
	t := Topology{Producers: make([][]int, p), Consumers: make([][]int, p)}
	for i := 1; i < p; i++ {
		t.Producers[i] = []int{i - 1}
		t.Consumers[i-1] = []int{i}
	}
	return t
}
