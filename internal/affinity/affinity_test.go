package affinity

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseAndFormat(t *testing.T) {
	for list, want := range map[string][]int{"3": {3}, "0,2": {0, 2}, "0-3,8": {0, 1, 2, 3, 8}, "2,0-1,1": {0, 1, 2}} {
		got, err := Parse(list)
		require.NoError(t, err, list)
		require.Equal(t, want, got, list)
	}
	require.Equal(t, "0-3,8", Format([]int{0, 1, 2, 3, 8}))
	require.Equal(t, "5", Format([]int{5}))
	for _, bad := range []string{"", "a", "3-1", "-1", "1,,2"} {
		_, err := Parse(bad)
		require.ErrorContains(t, err, "is not a CPU list", bad)
	}
}
