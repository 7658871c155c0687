package graphsplit

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas/gonum"
	"gorgonia.org/tensor"
)

// TestImportSwapsNoBLAS: importing the package leaves gorgonia's default
// BLAS (gonum's) in place; UseFastBLAS is what installs the stage ops' one.
func TestImportSwapsNoBLAS(t *testing.T) {
	require.IsType(t, gonum.Implementation{}, importedBLAS, "the BLAS before UseFastBLAS")
	require.NotEqual(t, importedBLAS, tensor.WhichBLAS(), "UseFastBLAS installed another")
}
