package asyncvm

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

type traceFile struct {
	DisplayTimeUnit string `json:"displayTimeUnit"`
	TraceEvents     []struct {
		Name string         `json:"name"`
		Cat  string         `json:"cat"`
		Ph   string         `json:"ph"`
		Ts   *float64       `json:"ts"`
		Dur  *float64       `json:"dur"`
		Tid  int            `json:"tid"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
}

func readTrace(t *testing.T, events [][]Event, opts ...TraceOption) traceFile {
	var b bytes.Buffer
	require.NoError(t, WriteTrace(&b, events, opts...))
	var tr traceFile
	require.NoError(t, json.Unmarshal(b.Bytes(), &tr), b.String())
	return tr
}

// TestTraceHasEveryAction: a real run's trace has one complete event per
// action, each with a duration, on the thread of its stage; the last-k
// option keeps exactly the actions of the last k minibatches.
func TestTraceHasEveryAction(t *testing.T) {
	const n, steps = 2, 6
	m, err := testmodels.MLP(tensor.Float64, 2, 1)
	require.NoError(t, err)
	_, vm := pipelineTraining(t, m, makeData(m, n*steps, 1), n, steps, []graphsplit.Option{graphsplit.Stages(3)}, WithSchedule(schedule.PipeMare()))
	events := vm.Events()
	require.NoError(t, vm.Close())
	actions := 0
	for _, st := range events {
		actions += len(st)
	}
	tr := readTrace(t, events)
	require.Equal(t, "ms", tr.DisplayTimeUnit)
	x := 0
	for _, e := range tr.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		x++
		require.NotNil(t, e.Dur, "%s: every complete event has a duration", e.Name)
		require.GreaterOrEqual(t, *e.Dur, 0.0)
		require.NotNil(t, e.Ts)
		require.Equal(t, "pipemare", e.Args["schedule"])
		if e.Cat == "F" || e.Cat == "B" {
			require.Contains(t, e.Args, "microbatch")
		} else {
			require.Contains(t, e.Args, "minibatch")
		}
		require.Less(t, e.Tid, 3)
	}
	require.Equal(t, actions, x)

	for _, k := range []int{1, 2, steps, steps + 5} {
		tr := readTrace(t, events, TraceLastMinibatches(k, n))
		want := 0
		for _, st := range events {
			for _, e := range st {
				mb := e.Action.Step
				if e.Action.Op == schedule.OpForward || e.Action.Op == schedule.OpBackward {
					mb = e.Action.Micro / n
				}
				if mb >= steps-k {
					want++
				}
			}
		}
		got := 0
		for _, e := range tr.TraceEvents {
			if e.Ph == "X" {
				got++
				require.GreaterOrEqual(t, int(e.Args["minibatch"].(float64)), steps-k)
			}
		}
		require.Equal(t, want, got, "last %d minibatches", k)
		if k < steps {
			require.Less(t, got, actions)
		}
	}
}

// TestTraceKeepsZeroDurations: an action shorter than the clock's
// resolution still has "dur": 0.
func TestTraceKeepsZeroDurations(t *testing.T) {
	tr := readTrace(t, [][]Event{{{Stage: 0, Action: schedule.Update(0), Schedule: "gpipe", Start: 5000, End: 5000}}})
	require.Len(t, tr.TraceEvents, 3) // process and thread names, the update
	u := tr.TraceEvents[2]
	require.Equal(t, "U0", u.Name)
	require.NotNil(t, u.Dur)
	require.Zero(t, *u.Dur)
	require.Equal(t, 5.0, *u.Ts)
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestTraceReportsWriteErrors(t *testing.T) {
	require.ErrorContains(t, WriteTrace(failingWriter{}, [][]Event{{{Action: schedule.Forward(0)}}}), "disk full")
	require.ErrorContains(t, WriteTrace(&bytes.Buffer{}, nil, TraceLastMinibatches(3, 0)), "at least one microbatch")
}
