package asyncvm

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pkg/errors"
)

// TraceOption configures WriteTrace.
type TraceOption func(*traceConfig)

type traceConfig struct {
	last, n int // keep the last `last` minibatches of n microbatches; 0: all
}

// TraceLastMinibatches keeps only the actions of the last k minibatches of
// the run: forwards and backwards of their microbatches (n per minibatch,
// the VM's WithMicrobatches, which Report.Microbatches repeats) and their
// updates and flushes. A run's trace grows with its length (about 130
// bytes per action); the last minibatches show the steady state at a
// bounded size. k ≤ 0 keeps everything.
func TraceLastMinibatches(k, n int) TraceOption {
	return func(c *traceConfig) { c.last, c.n = k, n }
}

// traceEvent is one event of the Chrome Trace Event Format.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"` // every complete (X) event has one, zero included
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// WriteTrace writes events, as VM.Events returns them (per stage, each
// stage's actions in order), to w as a Chrome trace (the JSON Trace Event
// Format that Perfetto and chrome://tracing open): an object with
// "traceEvents" and "displayTimeUnit": "ms".
//
// Each stage is a thread (tid = stage, named "stage i" by a thread_name
// metadata event) of process 1. Each action is a complete event (ph "X")
// named like the action ("F12", "B12", "U3", "|3"), with category its op
// ("F", "B", "U", "|"), start ts and duration dur in microseconds from the
// VM's construction (dur is always present, also when an action took less
// than the clock's resolution), and arguments: the schedule it ran under,
// the microbatch of a forward or backward, the minibatch (the optimizer
// step it belongs to) of an update or flush, and, when the options give
// the microbatches per minibatch, the minibatch of every action.
//
// WriteTrace only reads events; it returns the first error of w.
func WriteTrace(w io.Writer, events [][]Event, opts ...TraceOption) error {
	var c traceConfig
	for _, o := range opts {
		o(&c)
	}
	if c.last > 0 && c.n < 1 {
		return errors.Errorf("asyncvm: TraceLastMinibatches(%d, %d): a minibatch has at least one microbatch", c.last, c.n)
	}
	minibatch := func(a schedule.Action) int {
		switch a.Op {
		case schedule.OpForward, schedule.OpBackward, schedule.OpInput, schedule.OpWeight:
			return a.Micro / max(c.n, 1)
		}
		return a.Step
	}
	from := 0
	if c.last > 0 {
		end := 0
		for _, stage := range events {
			for _, e := range stage {
				end = max(end, minibatch(e.Action)+1)
			}
		}
		from = end - c.last
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if _, err := io.WriteString(bw, `{"displayTimeUnit":"ms","traceEvents":[`+"\n"); err != nil {
		return err
	}
	first := true
	put := func(ev traceEvent) error {
		if !first {
			if _, err := io.WriteString(bw, ","); err != nil {
				return err
			}
		}
		first = false
		return enc.Encode(ev) // one event per line
	}
	if err := put(traceEvent{Name: "process_name", Ph: "M", Pid: 1, Args: map[string]any{"name": "pipeline"}}); err != nil {
		return err
	}
	for i := range events {
		if err := put(traceEvent{Name: "thread_name", Ph: "M", Pid: 1, Tid: i, Args: map[string]any{"name": fmt.Sprintf("stage %d", i)}}); err != nil {
			return err
		}
	}
	for _, stage := range events {
		for _, e := range stage {
			if minibatch(e.Action) < from {
				continue
			}
			args := map[string]any{"schedule": e.Schedule}
			switch e.Action.Op {
			case schedule.OpForward, schedule.OpBackward, schedule.OpInput, schedule.OpWeight:
				args["microbatch"] = e.Action.Micro
				if c.n > 0 {
					args["minibatch"] = minibatch(e.Action)
				}
			default:
				args["minibatch"] = e.Action.Step
			}
			dur := float64(e.End-e.Start) / 1e3
			if err := put(traceEvent{
				Name: e.Action.String(), Cat: e.Action.Op.String(), Ph: "X",
				Ts: float64(e.Start) / 1e3, Dur: &dur, Pid: 1, Tid: e.Stage, Args: args,
			}); err != nil {
				return err
			}
		}
	}
	if _, err := io.WriteString(bw, "]}\n"); err != nil {
		return err
	}
	return bw.Flush()
}
