package stageops

import (
	"testing"

	"gorgonia.org/tensor"
)

// BenchmarkBiasAdd times the bias added to the zoo MLP's first layer (16
// rows of 256) and to the CNN's first convolution (16 × 8 channels of
// 28×28), float32.
func BenchmarkBiasAdd(b *testing.B) {
	for _, c := range []struct {
		name  string
		shape tensor.Shape
	}{{"mlp-16x256", tensor.Shape{16, 256}}, {"cnn-16x8x28x28", tensor.Shape{16, 8, 28, 28}}} {
		b.Run(c.name, func(b *testing.B) {
			x, y := make([]float32, c.shape.TotalSize()), make([]float32, c.shape.TotalSize())
			bias := make([]float32, c.shape[1])
			for i := range x {
				x[i] = float32(i%7) - 3
			}
			for i := range bias {
				bias[i] = float32(i) / 8
			}
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				biasKernel(y, x, bias, c.shape)
			}
		})
	}
}
