package testmodels

import (
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestResNet50IsResNet50 checks the model against torchvision's resnet50:
// 25,557,032 parameters, 53 convolutions each with its BatchNorm.
func TestResNet50IsResNet50(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, 5× slower under the race detector and nothing for it to check; go test ./... runs it")
	}
	m, err := ResNet50(tensor.Float32, 1, 1)
	require.NoError(t, err)
	params, filters := 0, 0
	for _, l := range m.Learnables {
		params += l.Shape().TotalSize()
		if l.Dims() == 4 && l.Shape()[0] > 1 { // not a BatchNorm's (1, C, 1, 1)
			filters++
		}
	}
	require.Equal(t, 25557032, params)
	require.Equal(t, 53, filters)
	require.Len(t, m.BatchNorms, 53)
	require.True(t, m.Cost.IsScalar())
}
