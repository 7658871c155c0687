package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
)

// writeOutputs writes report.json, trace.json (of the first run) and the
// plots of runs into dir.
func writeOutputs(dir string, runs []*zoo.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	type runReport struct {
		*zoo.Result
		Schedule string `json:"schedule"`
	}
	var reports []runReport
	for _, r := range runs {
		reports = append(reports, runReport{Result: r, Schedule: r.Report.Schedule})
	}
	b, err := json.MarshalIndent(reports, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644); err != nil {
		return err
	}
	if err := writeTrace(filepath.Join(dir, "trace.json"), runs[0]); err != nil {
		return err
	}
	return writePlots(dir, runs)
}

// writeTrace writes Chrome trace events (Perfetto, chrome://tracing): one
// thread per stage, one complete event per action, microbatch and step in
// the arguments.
func writeTrace(path string, r *zoo.Result) error {
	type event struct {
		Name string         `json:"name"`
		Cat  string         `json:"cat"`
		Ph   string         `json:"ph"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur,omitempty"`
		Pid  int            `json:"pid"`
		Tid  int            `json:"tid"`
		Args map[string]any `json:"args,omitempty"`
	}
	var evs []event
	for i := range r.Events {
		evs = append(evs, event{Name: "thread_name", Ph: "M", Pid: 1, Tid: i, Args: map[string]any{"name": fmt.Sprintf("stage %d", i)}})
	}
	for _, stage := range r.Events {
		for _, e := range stage {
			args := map[string]any{"schedule": e.Schedule}
			switch e.Action.Op {
			case schedule.OpForward, schedule.OpBackward:
				args["microbatch"] = e.Action.Micro
			default:
				args["step"] = e.Action.Step
			}
			evs = append(evs, event{
				Name: e.Action.String(), Cat: e.Action.Op.String(), Ph: "X",
				Ts: float64(e.Start) / 1e3, Dur: float64(e.End-e.Start) / 1e3,
				Pid: 1, Tid: e.Stage, Args: args,
			})
		}
	}
	b, err := json.Marshal(map[string]any{"traceEvents": evs, "displayTimeUnit": "ms"})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
