package asyncvm

import (
	"runtime"
	"sort"
	"time"

	"github.com/pipemare/pipemare/schedule"
)

// Report is everything the engine measured, for programs to read and for
// the command line to print and plot.
type Report struct {
	Schedule     string `json:"schedule"`
	Stages       int    `json:"stages"`
	Microbatches int    `json:"microbatches"`
	// Minibatches is the number of optimizer steps supplied so far.
	Minibatches int `json:"minibatches"`
	// Samples is the number of training samples run forward.
	Samples int `json:"samples"`
	// Wall is the time from the first to the last action.
	Wall          time.Duration `json:"wall_ns"`
	SamplesPerSec float64       `json:"samples_per_sec"`
	// Utilization is the mean over stages of busy time over the steady-state
	// window (from the moment every stage has started to the moment the
	// first stage runs out of work); Bubble is 1 − Utilization.
	Utilization float64       `json:"utilization"`
	Bubble      float64       `json:"bubble"`
	PerStage    []StageReport `json:"stages_detail"`
	Memory      Memory        `json:"memory_total"`
	// PeakHeap is the process's heap in use when the report was made, and
	// the largest heap the Go runtime has obtained from the system.
	HeapInUse uint64 `json:"heap_in_use_bytes"`
	HeapSys   uint64 `json:"heap_sys_bytes"`
	// Segments lists the schedules the run went through (a warm-up shows
	// as a synchronous segment before the asynchronous one).
	Segments []SegmentReport `json:"segments"`
}

// SegmentReport is a run of minibatches under one schedule.
type SegmentReport struct {
	Schedule string        `json:"schedule"`
	First    int           `json:"first_minibatch"`
	Steps    int           `json:"minibatches"`
	Start    time.Duration `json:"start_ns"`
}

// StageReport is one stage's measurements.
type StageReport struct {
	Stage       int           `json:"stage"`
	Forwards    int           `json:"forwards"`
	Backwards   int           `json:"backwards"`
	Updates     int           `json:"updates"`
	Busy        time.Duration `json:"busy_ns"`
	Window      time.Duration `json:"window_ns"`
	Utilization float64       `json:"utilization"`
	// Delays counts forwards by how many updates older than the weights
	// their gradient was applied to were the weights they read (the
	// measured τ); BackwardLag the same for the weights backwards read.
	Delays      map[int]int `json:"delays"`
	BackwardLag map[int]int `json:"backward_lag"`
	MeanDelay   float64     `json:"mean_delay"`
	// FormulaDelay is τ_i = ceil((2(P−1−i)+1)/N) for asynchronous
	// schedules, 0 otherwise.
	FormulaDelay int    `json:"formula_delay"`
	Memory       Memory `json:"memory"`
	// PeakWeightVersions is the most weight copies a PipeDream stage held.
	PeakWeightVersions int `json:"peak_weight_versions"`
	// Discrepancy is the mean ‖u_bkwd − u_fwd‖/‖u_fwd‖ over asynchronous
	// backwards (with WithDiscrepancy; 0 otherwise).
	Discrepancy float64 `json:"discrepancy"`
}

// Memory is bytes by category.
type Memory struct {
	Parameters        int64 `json:"parameters"`
	OptimizerState    int64 `json:"optimizer_state"`
	Gradients         int64 `json:"gradient_accumulators"`
	StashedWeights    int64 `json:"stashed_weights_peak"`
	Correction        int64 `json:"correction_buffers"`
	StashedActivation int64 `json:"stashed_activations_peak"`
}

// Total is the sum of all categories.
func (m Memory) Total() int64 {
	return m.Parameters + m.OptimizerState + m.Gradients + m.StashedWeights + m.Correction + m.StashedActivation
}

func (m *Memory) add(o Memory) {
	m.Parameters += o.Parameters
	m.OptimizerState += o.OptimizerState
	m.Gradients += o.Gradients
	m.StashedWeights += o.StashedWeights
	m.Correction += o.Correction
	m.StashedActivation += o.StashedActivation
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
	var first, last time.Duration = -1, 0
	// Steady state: from the last stage's first action to the moment the
	// first stage to run out of work ran its last action.
	winStart, winEnd := time.Duration(0), time.Duration(-1)
	for _, ev := range events {
		if len(ev) == 0 {
			continue
		}
		if first < 0 || ev[0].Start < first {
			first = ev[0].Start
		}
		last = max(last, ev[len(ev)-1].End)
		winStart = max(winStart, ev[0].Start)
		if winEnd < 0 || ev[len(ev)-1].End < winEnd {
			winEnd = ev[len(ev)-1].End
		}
	}
	if first >= 0 {
		r.Wall = last - first
	}
	util := 0.0
	for i, h := range vm.heard {
		st := h.stats
		sr := StageReport{Stage: i, Delays: copyHist(st.Delays), BackwardLag: copyHist(st.BackwardLag), PeakWeightVersions: st.PeakWeightVersions}
		if vm.cfg.sched.Async {
			sr.FormulaDelay = schedule.Delay(vm.p, vm.n, i)
		}
		for _, ev := range events[i] {
			switch ev.Action.Op {
			case schedule.OpForward:
				sr.Forwards++
			case schedule.OpBackward:
				sr.Backwards++
			case schedule.OpUpdate:
				sr.Updates++
			}
			s, e := max(ev.Start, winStart), min(ev.End, winEnd)
			if e > s {
				sr.Busy += e - s
			}
		}
		if winEnd > winStart {
			sr.Window = winEnd - winStart
			sr.Utilization = float64(sr.Busy) / float64(sr.Window)
		}
		util += sr.Utilization
		n, sum := 0, 0
		for d, c := range sr.Delays {
			n += c
			sum += d * c
		}
		if n > 0 {
			sr.MeanDelay = float64(sum) / float64(n)
		}
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
		}
		r.Memory.add(sr.Memory)
		r.PerStage = append(r.PerStage, sr)
		if i == vm.p-1 {
			r.Samples = sr.Forwards * vm.plan.Feeds[0].Shape[0]
		}
	}
	r.Utilization = util / float64(vm.p)
	r.Bubble = 1 - r.Utilization
	if r.Wall > 0 {
		r.SamplesPerSec = float64(r.Samples) / r.Wall.Seconds()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.HeapInUse, r.HeapSys = ms.HeapInuse, ms.HeapSys
	return r
}

func copyHist(h map[int]int) map[int]int {
	out := make(map[int]int, len(h))
	for k, v := range h {
		out[k] = v
	}
	return out
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
