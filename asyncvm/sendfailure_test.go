package asyncvm

import (
	"testing"

	"github.com/pipemare/pipemare/transport"
	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"
)

// TestSendFailureNamesTheUnreachableStage: a send to stage 1 that fails
// because a link to or from stage 1 broke (the transport may learn of it on
// the reading side first) says stage 1 is unreachable; any other failure
// names the stage and what was being sent.
func TestSendFailureNamesTheUnreachableStage(t *testing.T) {
	broke := errors.New("the stream broke")
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"its reading side", &transport.LinkError{From: 1, To: transport.Driver, Kind: transport.Control, Err: broke},
			"asyncvm: stage 1 is unreachable: sending it the data of microbatch 3; every stage is stopped, restart the pipeline from its last checkpoint: transport: link stage 1 → driver (control): the stream broke"},
		{"its writing side", &transport.LinkError{From: transport.Driver, To: 1, Kind: transport.Control, Err: broke},
			"asyncvm: stage 1 is unreachable: sending it the data of microbatch 3; every stage is stopped, restart the pipeline from its last checkpoint: transport: link driver → stage 1 (control): the stream broke"},
		{"another stage's link", &transport.LinkError{From: 2, To: transport.Driver, Kind: transport.Control, Err: broke},
			"asyncvm: stage 1: sending it the data of microbatch 3: transport: link stage 2 → driver (control): the stream broke"},
		{"no link", broke, "asyncvm: stage 1: sending it the data of microbatch 3: the stream broke"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := sendFailure(c.err, 1, "sending it the data of microbatch 3")
			require.EqualError(t, err, c.want)
			require.ErrorIs(t, err, broke)
		})
	}
}
