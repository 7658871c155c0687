package launch

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/runspec"
)

// asFlags is err's message as pipemare words it, each setting as its
// flag (runspec.Worded); another error's message as it is.
func asFlags(err error) string {
	var w runspec.Worded
	if errors.As(err, &w) {
		return w.Words(func(s string) string { return "-" + strings.ReplaceAll(s, "_", "-") })
	}
	return err.Error()
}

// requireFlags requires err to be a runspec.Worded error whose message, as
// pipemare words it, is want.
func requireFlags(t *testing.T, err error, want string) {
	t.Helper()
	var w runspec.Worded
	require.ErrorAs(t, err, &w)
	require.Equal(t, want, asFlags(err))
}
