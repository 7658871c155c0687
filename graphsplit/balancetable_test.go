package graphsplit

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
)

// TestWriteBalance: each stage's times and share, how busy a device per
// stage would be, and, for a cut that leaves most stages idle, how few
// stages would go as fast.
func TestWriteBalance(t *testing.T) {
	var b strings.Builder
	p := &Plan{}
	ms := time.Millisecond
	times := []StageTime{{Forward: 2 * ms, Backward: 6 * ms}, {Forward: ms, Backward: ms}, {Forward: ms, Backward: ms}, {Forward: ms, Backward: ms}}
	require.NoError(t, p.WriteBalance(&b, times))
	require.Contains(t, b.String(), "      0       2.000        6.000    57%  1.00\n")
	require.Contains(t, b.String(), "      3       1.000        1.000    14%  0.25\n")
	require.Contains(t, b.String(), "one device per stage: 0.44 busy on average, 1.75× one device\n")
	require.Contains(t, b.String(), "3 of 4 stages are less than half busy: the slowest holds 57% of the work, so 1 stages at its pace")
	require.Error(t, p.WriteBalance(&b, []StageTime{{}}), "no time measured")

	b.Reset() // a measured cut of stages on workers (OnWorkers): each worker's share
	p = &Plan{a: &analysis{seq: make([]*gorgonia.Node, 8), stageAt: []int{0, 0, 1, 1, 2, 2, 3, 3}}, Balance: &Balance{Times: times, Spread: 1.14, Workers: []int{0, 1, 1, 0}}}
	require.NoError(t, p.WriteBalance(&b, times))
	require.Contains(t, b.String(), "cut before ops 2,4,6\neach worker runs its stages in turn: worker 0 (stages 0,3) 71%, worker 1 (stages 1,2) 29%\n")
}
