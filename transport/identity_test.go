package transport_test

import (
	"testing"

	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/transport"
)

func TestIdentityCheckNamesTheFirstDifference(t *testing.T) {
	mine := transport.Identity{Plan: "abcdef0123456789", Settings: []transport.Setting{{"lr", "0.01"}, {"seed", "1"}}}
	require.NoError(t, mine.Check(mine, "stage 1"))

	for name, tc := range map[string]struct {
		theirs             transport.Identity
		setting, my, their string
	}{
		"plan":    {transport.Identity{Plan: "ffff", Settings: mine.Settings}, transport.PlanSetting, mine.Plan, "ffff"},
		"value":   {transport.Identity{Plan: mine.Plan, Settings: []transport.Setting{{"lr", "0.02"}, {"seed", "1"}}}, "lr", "0.01", "0.02"},
		"missing": {transport.Identity{Plan: mine.Plan, Settings: []transport.Setting{{"lr", "0.01"}}}, "seed", "1", "(not set)"},
		"extra":   {transport.Identity{Plan: mine.Plan, Settings: append(append([]transport.Setting{}, mine.Settings...), transport.Setting{"t2", "on"})}, "t2", "(not set)", "on"},
	} {
		t.Run(name, func(t *testing.T) {
			err := mine.Check(tc.theirs, "stage 1 at 127.0.0.1:7001")
			var m *transport.MismatchError
			require.True(t, errors.As(err, &m), "%v", err)
			require.Equal(t, tc.setting, m.Setting)
			require.Equal(t, tc.my, m.Mine)
			require.Equal(t, tc.their, m.Theirs)
			require.Contains(t, err.Error(), "stage 1 at 127.0.0.1:7001")
		})
	}
}

func TestIdentityCheckIgnoresOrderOfTheirSettings(t *testing.T) {
	mine := transport.Identity{Plan: "p", Settings: []transport.Setting{{"lr", "0.01"}, {"seed", "1"}}}
	theirs := transport.Identity{Plan: "p", Settings: []transport.Setting{{"seed", "1"}, {"lr", "0.01"}}}
	require.NoError(t, mine.Check(theirs, "driver"))
}
