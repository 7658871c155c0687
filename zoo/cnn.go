package zoo

import (
	"fmt"
	"math/rand"

	"github.com/pkg/errors"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// conv is a 3×3 convolution with padding 1 (no bias: BatchNorm follows),
// filter drawn Glorot-uniform.
func conv(g *gorgonia.ExprGraph, in initializer, name string, x *gorgonia.Node, cin, cout, stride int, learn *gorgonia.Nodes) (*gorgonia.Node, error) {
	w := param(g, name+".W", in.glorot(cin*9, cout*9, cout, cin, 3, 3))
	*learn = append(*learn, w)
	h, err := gorgonia.Conv2d(x, w, tensor.Shape{3, 3}, []int{1, 1}, []int{stride, stride}, []int{1, 1})
	if err != nil {
		return nil, errors.Wrapf(err, "%s", name)
	}
	return h, nil
}

// bnMomentum is the weight of each microbatch's statistics in BatchNorm's
// running mean and variance. Gorgonia follows PyTorch here (running =
// m·batch + (1−m)·running), not Keras: 0.9 would make the statistics used
// at evaluation those of the last few images.
const bnMomentum = 0.05

// batchNorm normalises over the channels of x (B, C, H, W) with a learnable
// per-channel scale and bias.
func batchNorm(g *gorgonia.ExprGraph, name string, x *gorgonia.Node, m *Model) (*gorgonia.Node, error) {
	c := x.Shape()[1]
	scale := param(g, name+".scale", constant(1, 1, c, 1, 1))
	bias := param(g, name+".bias", constant(0, 1, c, 1, 1))
	m.Learnables = append(m.Learnables, scale, bias)
	y, _, _, op, err := gorgonia.BatchNorm(x, scale, bias, bnMomentum, 1e-5)
	if err != nil {
		return nil, errors.Wrapf(err, "%s", name)
	}
	m.BatchNorms = append(m.BatchNorms, op)
	return y, nil
}

// CNN is a small LeNet-like network with BatchNorm: conv 8 → BN → ReLU →
// max-pool → conv 16 → BN → ReLU → max-pool → fc 128 → ReLU → fc 10, on
// 28×28 images, float32.
func CNN(batch int, seed int64) (*Model, error) {
	g := gorgonia.NewGraph()
	in := initializer{rand.New(rand.NewSource(seed))}
	m := &Model{Name: "cnn", Graph: g, Batch: batch}
	m.X = gorgonia.NewTensor(g, tensor.Float32, 4, gorgonia.WithShape(batch, 1, 28, 28), gorgonia.WithName("x"))
	m.Y = gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(batch, 10), gorgonia.WithName("y"))
	h := m.X
	var err error
	for i, ch := range [][2]int{{1, 8}, {8, 16}} {
		name := fmt.Sprintf("conv%d", i+1)
		if h, err = conv(g, in, name, h, ch[0], ch[1], 1, &m.Learnables); err != nil {
			return nil, err
		}
		if h, err = batchNorm(g, fmt.Sprintf("bn%d", i+1), h, m); err != nil {
			return nil, err
		}
		if h, err = gorgonia.Rectify(h); err != nil {
			return nil, err
		}
		if h, err = gorgonia.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}); err != nil {
			return nil, err
		}
	}
	if h, err = gorgonia.Reshape(h, tensor.Shape{batch, 16 * 7 * 7}); err != nil {
		return nil, err
	}
	if h, err = linear(g, in, "fc1", h, 16*7*7, 128, &m.Learnables); err != nil {
		return nil, err
	}
	if h, err = gorgonia.Rectify(h); err != nil {
		return nil, err
	}
	if m.Logits, err = linear(g, in, "fc2", h, 128, 10, &m.Learnables); err != nil {
		return nil, err
	}
	if m.Cost, err = crossEntropy(m.Logits, m.Y); err != nil {
		return nil, err
	}
	return m, nil
}

// ResNet is a residual network with BatchNorm, deep enough for at least 15
// fine-grained stages: two conv–BN–ReLU–max-pool layers take 28×28 images
// to 16×7×7, six residual blocks y = ReLU(x + BN(conv(ReLU(BN(conv(x))))))
// follow, then global average pooling and a linear classifier: 15 weight
// layers, float32.
func ResNet(batch int, seed int64) (*Model, error) {
	g := gorgonia.NewGraph()
	in := initializer{rand.New(rand.NewSource(seed))}
	m := &Model{Name: "resnet", Graph: g, Batch: batch}
	m.X = gorgonia.NewTensor(g, tensor.Float32, 4, gorgonia.WithShape(batch, 1, 28, 28), gorgonia.WithName("x"))
	m.Y = gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(batch, 10), gorgonia.WithName("y"))
	const width, blocks, side = 16, 6, 7
	h := m.X
	var err error
	for i, cin := range []int{1, width} {
		name := fmt.Sprintf("stem%d", i+1)
		if h, err = conv(g, in, name, h, cin, width, 1, &m.Learnables); err != nil {
			return nil, err
		}
		if h, err = batchNorm(g, name+".bn", h, m); err != nil {
			return nil, err
		}
		if h, err = gorgonia.Rectify(h); err != nil {
			return nil, err
		}
		if h, err = gorgonia.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}); err != nil {
			return nil, err
		}
	}
	for b := 1; b <= blocks; b++ {
		name := fmt.Sprintf("block%d", b)
		r, err := conv(g, in, name+".conv1", h, width, width, 1, &m.Learnables)
		if err != nil {
			return nil, err
		}
		if r, err = batchNorm(g, name+".bn1", r, m); err != nil {
			return nil, err
		}
		if r, err = gorgonia.Rectify(r); err != nil {
			return nil, err
		}
		if r, err = conv(g, in, name+".conv2", r, width, width, 1, &m.Learnables); err != nil {
			return nil, err
		}
		if r, err = batchNorm(g, name+".bn2", r, m); err != nil {
			return nil, err
		}
		if h, err = gorgonia.Add(h, r); err != nil {
			return nil, err
		}
		if h, err = gorgonia.Rectify(h); err != nil {
			return nil, err
		}
	}
	// Global average pooling as a mean over the pixels (gorgonia's
	// GlobalAveragePool2D has no symbolic gradient).
	if h, err = gorgonia.Reshape(h, tensor.Shape{batch, width, side * side}); err != nil {
		return nil, err
	}
	if h, err = gorgonia.Mean(h, 2); err != nil {
		return nil, err
	}
	if m.Logits, err = linear(g, in, "fc", h, width, 10, &m.Learnables); err != nil {
		return nil, err
	}
	if m.Cost, err = crossEntropy(m.Logits, m.Y); err != nil {
		return nil, err
	}
	return m, nil
}
