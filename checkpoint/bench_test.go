package checkpoint

import (
	"testing"

	"gorgonia.org/tensor"
)

// mlpShards are three stages holding the zoo MLP's weights three times
// over (weights, Momentum's velocity, T2's δ): 2.8 MB in all.
func mlpShards() []Shard {
	shapes := [][][]int{{{784, 256}, {1, 256}}, {{256, 128}, {1, 128}}, {{128, 10}, {1, 10}}}
	out := make([]Shard, len(shapes))
	for i, st := range shapes {
		out[i] = Shard{Tensors: map[string]tensor.Tensor{}, Ints: map[string]int64{"version": 1}}
		for j, sh := range st {
			for _, what := range []string{"weights", "velocity", "delta"} {
				out[i].Tensors[what+"/"+string(rune('0'+j))] = tensor.New(tensor.WithShape(sh...), tensor.Of(tensor.Float32))
			}
		}
	}
	return out
}

// BenchmarkCheckpoint writes and commits a checkpoint of mlpShards
// (Begin, three WriteShards, Commit with its fsyncs), then verifies it
// (Latest).
func BenchmarkCheckpoint(b *testing.B) {
	root := b.TempDir()
	shards := mlpShards()
	step := int64(0)
	b.Run("write", func(b *testing.B) {
		for b.Loop() {
			step++
			dir, err := Begin(root, step)
			if err != nil {
				b.Fatal(err)
			}
			m := Manifest{Step: step}
			for i, s := range shards {
				fi, err := WriteShard(dir, i, s)
				if err != nil {
					b.Fatal(err)
				}
				m.Stages = append(m.Stages, fi)
			}
			if _, err := Commit(root, m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify", func(b *testing.B) {
		for b.Loop() {
			if _, err := Latest(root); err != nil {
				b.Fatal(err)
			}
		}
	})
}
