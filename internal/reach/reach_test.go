package reach

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestThisBuildPassesTheGate: the module requires the release the package
// reads, so every test of the repository runs behind an open gate.
// Changing the release fails here: read every function of the package
// against the new release's source before changing Version.
func TestThisBuildPassesTheGate(t *testing.T) {
	require.NoError(t, Check())
	require.Equal(t, Version, linked())
}

// TestTheGateSaysWhatToDo: the error names the release found, the one
// required, and the command that requires it.
func TestTheGateSaysWhatToDo(t *testing.T) {
	err := error(&VersionError{Found: "v0.9.17", Want: Version})
	require.EqualError(t, err, "gorgonia: this binary links v0.9.17, but pipemare reads the internals of gorgonia.org/gorgonia v0.9.18 only (its ops' fields, its tape machine): require that release in go.mod (go get gorgonia.org/gorgonia@v0.9.18), without a replace directive")
}

// closedGate makes the gate fail for the rest of the test, as a binary
// linking v0.9.17 would.
func closedGate(t *testing.T) *VersionError {
	require.NoError(t, Check()) // the gate has been decided
	ve := &VersionError{Found: "v0.9.17", Want: Version}
	gate.err = ve
	t.Cleanup(func() { gate.err = nil })
	return ve
}

// TestAClosedGateStopsEveryReach: behind a failing gate no internal is
// read: each reader returns the gate's error.
func TestAClosedGateStopsEveryReach(t *testing.T) {
	m := gorgonia.NewMomentum(gorgonia.WithMomentum(0.5))
	g := gorgonia.NewGraph()
	gorgonia.Must(gorgonia.Tanh(gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(2, 2), gorgonia.WithName("x"))))
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	code, err := Program(vm)
	require.NoError(t, err)
	require.NotEmpty(t, code)
	ve := closedGate(t)
	for name, err := range map[string]error{
		"Field":   second(Field(m, "momentum")),
		"Float":   second(Float(m, "momentum")),
		"Int":     second(Int(m, "momentum")),
		"Bool":    second(Bool(m, "momentum")),
		"Ints":    second(Ints(m, "momentum")),
		"Program": second(Program(vm)),
		"TapeOf":  second(TapeOf(vm)),
	} {
		var got *VersionError
		require.True(t, errors.As(err, &got), "%s: %v", name, err)
		require.Same(t, ve, got, name)
	}
}

func second[T any](_ T, err error) error { return err }

// TestFieldsOfGorgoniasValues: the readers read unexported fields of
// gorgonia's values and name a field that is not there.
func TestFieldsOfGorgoniasValues(t *testing.T) {
	m := gorgonia.NewMomentum(gorgonia.WithMomentum(0.5), gorgonia.WithLearnRate(0.25))
	beta, err := Float(m, "momentum")
	require.NoError(t, err)
	require.Equal(t, 0.5, beta)
	eta, err := Float(m, "eta")
	require.NoError(t, err)
	require.Equal(t, 0.25, eta)
	_, err = Float(m, "nothing")
	require.EqualError(t, err, "gorgonia.Momentum has no field nothing")
	_, err = Int(m, "momentum")
	require.EqualError(t, err, "field momentum is float64, not an integer")
	require.Equal(t, "Momentum", TypeName(m))
	require.Equal(t, "*gorgonia.Momentum", TypeString(m))
	require.True(t, FromGorgonia(m))
	require.False(t, FromGorgonia(t))
	require.Equal(t, "", TypeName(nil))
}
