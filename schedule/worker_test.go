package schedule

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlacementsHostEveryStageOnce: each placement gives every stage one
// worker — contiguous blocks, round robin, a V — and contiguous splits
// stages that the workers do not divide into blocks one apart in size,
// the larger first.
func TestPlacementsHostEveryStageOnce(t *testing.T) {
	for _, c := range []struct {
		pl   Placement
		p, w int
		want [][]int
	}{
		{Contiguous, 4, 2, [][]int{{0, 1}, {2, 3}}},
		{RoundRobin, 4, 2, [][]int{{0, 2}, {1, 3}}},
		{VShape, 4, 2, [][]int{{0, 3}, {1, 2}}},
		{VShape, 8, 2, [][]int{{0, 3, 4, 7}, {1, 2, 5, 6}}},
		{Contiguous, 15, 2, [][]int{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14}}},
		{Contiguous, 5, 3, [][]int{{0, 1}, {2, 3}, {4}}},
		{Contiguous, 3, 3, [][]int{{0}, {1}, {2}}},
	} {
		var got [][]int
		for j := range c.w {
			got = append(got, c.pl.Hosted(j, c.p, c.w))
		}
		require.Equal(t, c.want, got, "%v, %d stages on %d workers", c.pl, c.p, c.w)
	}
}
