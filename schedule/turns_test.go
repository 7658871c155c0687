package schedule

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTurnsFollowTheWorkerLists: for the schedules that repeat a worker
// order every step, every action of steps 0..2 has the position of its
// place in its worker's list (flushes left out); the others have no turns.
func TestTurnsFollowTheWorkerLists(t *testing.T) {
	for _, s := range []Schedule{Interleaved(2), ZBV()} {
		for _, pn := range [][2]int{{4, 2}, {4, 4}, {8, 4}, {8, 8}} {
			p, n := pn[0], pn[1]
			tu, ok := NewTurns(s, p, n)
			require.True(t, ok, s.Name)
			for w, list := range WorkerLists(s, p, n, 3) {
				pos := 0
				for _, sl := range list {
					gw, gp, ok := tu.Of(sl.Stage, sl.Action)
					if sl.Op == OpFlush {
						require.False(t, ok)
						continue
					}
					require.True(t, ok, "%s P%d N%d %v", s.Name, p, n, sl)
					require.Equal(t, w, gw, "%s P%d N%d %v", s.Name, p, n, sl)
					require.Equal(t, pos, gp, "%s P%d N%d %v", s.Name, p, n, sl)
					pos++
				}
			}
		}
	}
	for _, s := range []Schedule{OneFOneB(), ZBH1(), PipeMareVirtual(2, Contiguous)} {
		_, ok := NewTurns(s, 4, 4)
		require.False(t, ok, s.Name)
	}
}
