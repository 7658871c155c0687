package asyncvm

import (
	"runtime"
	"sort"
	"time"

	"github.com/pipemare/pipemare/internal/stage"
	"github.com/pipemare/pipemare/schedule"
)

// Report is everything the engine measured, for programs to read and for
// the command line to print and plot. Its JSON form (the report of
// pipemare's report.json) uses the snake_case names in the tags; durations
// are integer nanoseconds (names ending in _ns), memory is bytes.
type Report struct {
	// Schedule is the name of the schedule the VM was built with (a
	// warm-up's schedule shows in Segments).
	Schedule string `json:"schedule"`
	// Stages is P; Microbatches is N, the microbatches per minibatch.
	Stages       int `json:"stages"`
	Microbatches int `json:"microbatches"`
	// Minibatches is the number of optimizer steps supplied so far.
	Minibatches int `json:"minibatches"`
	// Samples is the number of training samples run forward through the
	// last stage.
	Samples int `json:"samples"`
	// Wall is the time from the first to the last action; Training is
	// Wall less the time between the caller's calls, when the pipeline
	// had nothing to do (evaluation, checkpoints, the caller's own work).
	Wall     time.Duration `json:"wall_ns"`
	Training time.Duration `json:"training_ns"`
	// SamplesPerSec is Samples over Training: the pipeline's throughput
	// while it trained (0 before any action ran).
	SamplesPerSec float64 `json:"samples_per_sec"`
	// Utilization is the mean over stages of busy time over the time the
	// pipeline trained within the steady state (SteadyState: from the
	// moment every stage has started under the run's schedule, after any
	// warm-up, to the moment the first stage runs out of work), that is the
	// window less the time between the caller's calls (evaluation, writing
	// checkpoints, the caller's own work), when the pipeline had nothing to
	// do: the same training has the same utilization however long its
	// evaluations take. Drains inside a call (Flush, the drain before a
	// checkpoint) are training and count as idle. Before the run's schedule
	// has started (only a warm-up ran so far), the window is the warm-up
	// schedule's steady state. Bubble is 1 − Utilization.
	Utilization float64 `json:"utilization"`
	Bubble      float64 `json:"bubble"`
	// PerStage is each stage's report, in stage order.
	PerStage []StageReport `json:"stages_detail"`
	// Memory is the sum of the stages' Memory.
	Memory Memory `json:"memory_total"`
	// HeapInUse is the process's heap in use when the report was made, and
	// HeapSys the largest heap the Go runtime has obtained from the system
	// (runtime.MemStats.HeapInuse and HeapSys), in bytes.
	HeapInUse uint64 `json:"heap_in_use_bytes"`
	HeapSys   uint64 `json:"heap_sys_bytes"`
	// Segments lists the schedules the run went through (a warm-up shows
	// as a synchronous segment before the asynchronous one).
	Segments []SegmentReport `json:"segments"`
}

// SegmentReport is a run of minibatches under one schedule.
type SegmentReport struct {
	// Schedule is the segment's schedule.
	Schedule string `json:"schedule"`
	// First is the segment's first minibatch, Steps how many it ran.
	First int `json:"first_minibatch"`
	Steps int `json:"minibatches"`
	// Start is when the segment began, from the VM's construction.
	Start time.Duration `json:"start_ns"`
}

// StageReport is one stage's measurements. Fields that apply only to some
// schedules or options are documented as such and left out of the JSON
// when they do not apply (their Go value is then 0).
type StageReport struct {
	// Stage is the stage's index, from 0.
	Stage int `json:"stage"`
	// Forwards, Backwards and Updates count the actions the stage ran.
	Forwards  int `json:"forwards"`
	Backwards int `json:"backwards"`
	Updates   int `json:"updates"`
	// Busy is the stage's time in actions within the steady state
	// (SteadyState), Window the time the pipeline trained within it (its
	// length less the time between the caller's calls: Report.Utilization);
	// Utilization is Busy/Window.
	Busy        time.Duration `json:"busy_ns"`
	Window      time.Duration `json:"window_ns"`
	Utilization float64       `json:"utilization"`
	// BusyFraction is the stage's time in actions over the time the
	// pipeline trained (Report.Training: from the first action to the
	// last, less the time between the caller's calls), and
	// VirtualBusyFraction the same stage's over the makespan of the run
	// replayed on one virtual device per stage (Virtual): the fraction it
	// would have been busy had it never waited but for its inputs. The
	// two differ by the waiting that dependencies do not explain — a
	// message in flight, a core shared with another stage or with the
	// transport, the driver.
	BusyFraction        float64 `json:"busy_fraction"`
	VirtualBusyFraction float64 `json:"virtual_busy_fraction"`
	// Idle is where the stage's waiting went: for its inputs to be
	// computed, for them to arrive, at flushes.
	Idle Idle `json:"idle"`
	// Delays counts forwards by how many updates older than the weights
	// their gradient was applied to were the weights they read (the
	// measured τ; JSON keys are the delays as strings); BackwardLag the
	// same for the weights backwards read. Synchronous schedules count
	// every forward at 0.
	Delays      map[int]int `json:"delays"`
	BackwardLag map[int]int `json:"backward_lag"`
	// SharedDelays counts, for the learnables the stage reads a replica of
	// (a learnable another stage owns and updates), the forwards by the
	// delay they saw: the owner's version at the update minus the version
	// they read. It is absent when the stage replicates nothing.
	SharedDelays map[int]int `json:"shared_delays,omitempty"`
	// MeanDelay is the mean of Delays.
	MeanDelay float64 `json:"mean_delay"`
	// FormulaDelay is τ_i = ceil((2(P−1−i)+1)/N) for asynchronous
	// schedules; synchronous schedules have none (0, and absent from the
	// JSON).
	FormulaDelay int `json:"formula_delay,omitempty"`
	// Memory is the stage's memory by category.
	Memory Memory `json:"memory"`
	// PeakWeightVersions is the most weight copies the stage held at once
	// under weight stashing (PipeDream); other schedules keep no copies
	// (0, and absent from the JSON).
	PeakWeightVersions int `json:"peak_weight_versions,omitempty"`
	// Discrepancy is the mean ‖u_bkwd − u_fwd‖/‖u_fwd‖ over the stage's
	// asynchronous backwards: how far the weights a backward read were from
	// the weights its forward read. It is measured only with
	// WithDiscrepancy (0, and absent from the JSON, otherwise, and for a
	// stage with no asynchronous backward).
	Discrepancy float64 `json:"discrepancy,omitempty"`
}

// Memory is bytes by category. For a stage, the stashes are peaks over the
// run; for Report.Memory, the sums of the stages' peaks.
type Memory struct {
	// Parameters is the stage's learnables.
	Parameters int64 `json:"parameters"`
	// OptimizerState is the solver's state (Momentum's velocity, Adam's
	// moments), as reported by a StateSizer or estimated from the solver's
	// type.
	OptimizerState int64 `json:"optimizer_state"`
	// Gradients is the gradient accumulators (one per learnable).
	Gradients int64 `json:"gradient_accumulators"`
	// StashedWeights is the peak of the weight versions kept for
	// PipeDream's backwards.
	StashedWeights int64 `json:"stashed_weights_peak"`
	// Correction is T2's buffers (a CorrectionSizer's CorrectionBytes).
	Correction int64 `json:"correction_buffers"`
	// StashedActivation is the peak of what the stage keeps between a
	// forward and its backward: its inputs when it recomputes, its
	// intermediate values when it keeps them (WithActivations(Keep)).
	StashedActivation int64 `json:"stashed_activations_peak"`
	// DeferredGradients is the peak of what a split backward keeps
	// between its input gradient (I) and its weight gradient (W): what
	// the weight-gradient program reads, or, where I ran the whole
	// backward, the learnables' gradients.
	DeferredGradients int64 `json:"deferred_gradients_peak,omitempty"`
}

// Total is the sum of all categories.
func (m Memory) Total() int64 {
	return m.Parameters + m.OptimizerState + m.Gradients + m.StashedWeights + m.Correction + m.StashedActivation + m.DeferredGradients
}

func (m *Memory) add(o Memory) {
	m.Parameters += o.Parameters
	m.OptimizerState += o.OptimizerState
	m.Gradients += o.Gradients
	m.StashedWeights += o.StashedWeights
	m.Correction += o.Correction
	m.StashedActivation += o.StashedActivation
	m.DeferredGradients += o.DeferredGradients
}

// Events returns every action every stage ran so far, per stage in order.
// Call it between Steps; the slices are copies.
func (vm *VM) Events() [][]Event {
	out := make([][]Event, vm.p)
	for i, h := range vm.heard {
		out[i] = append([]Event(nil), h.events...)
	}
	return out
}

// Report summarises what ran so far. Call it between Steps.
func (vm *VM) Report() Report {
	r := Report{
		Schedule: vm.cfg.sched.Name, Stages: vm.p, Microbatches: vm.n,
		Minibatches: vm.supplied,
	}
	for _, s := range vm.segs {
		r.Segments = append(r.Segments, SegmentReport{Schedule: s.sched.Name, First: s.first, Steps: s.steps, Start: s.startedAt})
	}
	events := vm.Events()
	first, last := actionSpan(events)
	winStart, winEnd, ok := SteadyState(events, r.Schedule)
	if !ok && vm.cfg.warmup > 0 { // only the warm-up ran so far: its own steady state
		winStart, winEnd, _ = SteadyState(events, vm.cfg.warmSch.Name)
	}
	if first >= 0 {
		r.Wall = last - first
		r.Training = r.Wall - vm.paused(first, last)
	}
	win := reportWindow{start: winStart, end: winEnd, paused: vm.paused(winStart, winEnd), training: r.Training}
	virtual := vm.Replay()
	idles := idle(events, vm.topo, vm.paused)
	util := 0.0
	for i, h := range vm.heard {
		sr := vm.stageReport(i, h.stats.Clone(), events[i], win)
		if i < len(virtual.PerStage) {
			sr.VirtualBusyFraction = virtual.PerStage[i]
		}
		sr.Idle = idles[i]
		util += sr.Utilization
		r.Memory.add(sr.Memory)
		r.PerStage = append(r.PerStage, sr)
		if i == vm.p-1 {
			r.Samples = sr.Forwards * vm.plan.Feeds[0].Shape[0]
		}
	}
	r.Utilization = util / float64(vm.p)
	r.Bubble = 1 - r.Utilization
	if r.Training > 0 {
		r.SamplesPerSec = float64(r.Samples) / r.Training.Seconds()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.HeapInUse, r.HeapSys = ms.HeapInuse, ms.HeapSys
	return r
}

// actionSpan returns the start of the earliest first action and the end of the
// latest last action over the stages' events; first is −1 when no action
// ran.
func actionSpan(events [][]Event) (first, last time.Duration) {
	first, last = -1, 0
	for _, ev := range events {
		if len(ev) == 0 {
			continue
		}
		if first < 0 || ev[0].Start < first {
			first = ev[0].Start
		}
		last = max(last, ev[len(ev)-1].End)
	}
	return first, last
}

// reportWindow is what a stage's report is measured against: the steady
// state [start, end), the time between the caller's calls within it
// (paused), and the time the pipeline trained (Report.Training).
type reportWindow struct {
	start, end time.Duration
	paused     time.Duration
	training   time.Duration
}

// stageReport is stage i's report from its stats st and its events, but
// for what the whole run's measurements give (VirtualBusyFraction, Idle):
// its action counts, busy time and utilization within the steady state,
// busy fraction of the training time, delays and their mean, discrepancy
// and memory.
func (vm *VM) stageReport(i int, st stage.Stats, events []Event, win reportWindow) StageReport {
	sr := StageReport{Stage: i, Delays: st.Delays, BackwardLag: st.BackwardLag, PeakWeightVersions: st.PeakWeightVersions}
	if len(st.SharedDelays) > 0 {
		sr.SharedDelays = st.SharedDelays
	}
	if vm.cfg.sched.Async {
		sr.FormulaDelay = schedule.Delay(vm.p, vm.n, i)
	}
	for _, ev := range events {
		switch ev.Action.Op {
		case schedule.OpForward:
			sr.Forwards++
		case schedule.OpBackward, schedule.OpWeight: // a split backward counts at its W
			sr.Backwards++
		case schedule.OpUpdate:
			sr.Updates++
		}
		s, e := max(ev.Start, win.start), min(ev.End, win.end)
		if e > s {
			sr.Busy += e - s
		}
	}
	if win.end-win.start > win.paused {
		sr.Window = win.end - win.start - win.paused
		sr.Utilization = float64(sr.Busy) / float64(sr.Window)
	}
	if win.training > 0 {
		total := time.Duration(0)
		for _, ev := range events {
			total += ev.End - ev.Start
		}
		sr.BusyFraction = float64(total) / float64(win.training)
	}
	sr.MeanDelay = meanDelay(sr.Delays)
	if st.DiscrepancyCount > 0 {
		sr.Discrepancy = st.DiscrepancySum / float64(st.DiscrepancyCount)
	}
	sr.Memory = Memory{
		Parameters:        st.ParamBytes,
		OptimizerState:    st.StateBytes,
		Gradients:         st.ParamBytes,
		StashedWeights:    st.PeakWeightBytes,
		Correction:        st.CorrectionBytes,
		StashedActivation: st.PeakActivationBytes,
		DeferredGradients: st.PeakDeferredBytes,
	}
	return sr
}

// meanDelay is the mean delay of a histogram of delays (0 when empty).
func meanDelay(delays map[int]int) float64 {
	n, sum := 0, 0
	for d, c := range delays {
		n += c
		sum += d * c
	}
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// SortedKeys returns a histogram's keys in increasing order.
func SortedKeys(h map[int]int) []int {
	keys := make([]int, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}

// DelayLog returns, per stage, the delay each microbatch's forward saw
// (index: microbatch; −1 for microbatches not updated yet). It needs
// WithDelayLog. Call it between Steps.
func (vm *VM) DelayLog() [][]int {
	out := make([][]int, vm.p)
	for i, h := range vm.heard {
		out[i] = append([]int(nil), h.delayLog...)
	}
	return out
}
