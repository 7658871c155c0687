package schedule

// Topology says which stages exchange tensors: stage i reads activations
// from Producers[i] and sends its own to Consumers[i]; gradients flow back
// along the same pairs. Skip connections make it more than a chain.
type Topology struct {
	Producers, Consumers [][]int
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
