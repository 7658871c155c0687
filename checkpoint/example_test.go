package checkpoint_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/pipemare/pipemare/checkpoint"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// A coordinator begins a checkpoint, each of two stages writes its shard
// (in a pipeline across processes, each in its own process), the
// coordinator commits the manifest; after a restart the run opens the
// latest checkpoint, verified, and each stage reads its shard back.
func Example() {
	root, err := os.MkdirTemp("", "run")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)

	dir, err := checkpoint.Begin(root, 120)
	if err != nil {
		log.Fatal(err)
	}
	m := checkpoint.Manifest{Step: 120, Fingerprint: "mlp/3-stages",
		Data: checkpoint.DataPosition{Epoch: 2, Index: 40, Seed: 1}}
	for stage := 0; stage < 2; stage++ {
		fi, err := checkpoint.WriteShard(dir, stage, checkpoint.Shard{
			Tensors: map[string]tensor.Tensor{"weights/W": tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, float32(stage)}))},
			Ints:    map[string]int64{"version": 120},
		})
		if err != nil {
			log.Fatal(err)
		}
		m.Stages = append(m.Stages, fi)
	}
	if _, err := checkpoint.Commit(root, m); err != nil {
		log.Fatal(err)
	}

	c, err := checkpoint.Latest(root, checkpoint.WithFingerprint("mlp/3-stages"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(filepath.Base(c.Dir), "epoch", c.Manifest.Data.Epoch, "index", c.Manifest.Data.Index)
	for stage := range c.Manifest.Stages {
		s, err := c.Shard(stage)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(c.Manifest.Stages[stage].Name, s.Tensors["weights/W"].Data(), "version", s.Ints["version"])
	}
	_, err = checkpoint.Open(dir, checkpoint.WithFingerprint("cnn/4-stages"))
	fmt.Println(err != nil)
	// Output:
	// step-000000000120 epoch 2 index 40
	// stage-000.safetensors [1 2 3 0] version 120
	// stage-001.safetensors [1 2 3 1] version 120
	// true
}

// Save a trained model's learnables and load them into a freshly built
// model.
func ExampleSaveModel() {
	build := func(w []float32) gorgonia.Nodes {
		g := gorgonia.NewGraph()
		return gorgonia.Nodes{gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithName("fc.W"), gorgonia.WithShape(2, 2),
			gorgonia.WithValue(tensor.New(tensor.WithShape(2, 2), tensor.WithBacking(w))))}
	}
	dir, err := os.MkdirTemp("", "model")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model"+checkpoint.ModelExt)
	if err := checkpoint.SaveModel(path, build([]float32{0.5, -1, 2, 3})); err != nil {
		log.Fatal(err)
	}
	fresh := build(make([]float32, 4))
	if err := checkpoint.LoadModel(path, fresh); err != nil {
		log.Fatal(err)
	}
	fmt.Println(filepath.Base(path), fresh[0].Value().Data())
	// Output:
	// model.safetensors [0.5 -1 2 3]
}
