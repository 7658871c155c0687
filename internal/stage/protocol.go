package stage

import (
	"encoding/gob"
	"time"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/schedule"
	"gorgonia.org/tensor"
)

// The messages between a driver and a stage runtime. Control bodies go
// from the driver to the stage, Reply bodies back; tensors travel in the
// message's Values. Every body type is registered with encoding/gob, so
// that a network transport can carry it.

// Segment describes the schedule a Work belongs to, as the stage needs it.
type Segment struct {
	// Schedule is the schedule's name (events carry it).
	Schedule string
	// Stale says forwards may read weights older than the ones their
	// gradients are applied to (an asynchronous schedule, or delay
	// injection): the solver hears the measured delays, supplies the
	// backward's weights (T2) and the discrepancy is measured.
	Stale bool
	// StashWeights makes a backward read the weights its forward read.
	StashWeights bool
	// ForwardDelay 1 makes the forwards of step k read the weights after
	// update k−1, kept as one copy (PipeDream-2BW).
	ForwardDelay int
	// Delay is the delay this segment gives the stage, announced to the
	// solver when the segment starts (solvers.DelayAware).
	Delay float64
}

// Work orders the stage to run actions (absolute microbatch and step
// numbers) and answer Parked when it has run all of them.
type Work struct {
	Segment Segment
	Actions []schedule.Action
	// Shared holds, for each forward of Actions (nil for other actions),
	// the version of the learnables of each owner the stage replicates
	// (in increasing owner order) that the forward reads: what the
	// owner's forward of the same microbatch read.
	Shared [][]int
}

// Data gives the stage its data inputs for one microbatch, in the order of
// its Data ports (Values). Training data arrives before the Work whose
// forward reads it; Eval marks the data of an evaluation.
type Data struct {
	Micro int
	Eval  bool
}

// Evaluate orders count evaluation forwards (BatchNorm in inference mode,
// nothing kept, nothing updated) on evaluation microbatches 0..count−1,
// returning the values of the probed original nodes this stage computes.
// The stage answers Evaluated.
type Evaluate struct {
	Count  int
	Probes []int64
	// Shared is, per owner of a learnable the stage replicates, the
	// owner's current version, which the evaluation reads.
	Shared []int
}

// Stop ends Serve.
type Stop struct{}

// Save asks for the stage's Snapshot; the stage answers Saved. The
// pipeline must be drained. With Dir, the stage writes it as its shard of
// the checkpoint directory Dir (package checkpoint: temporary file, fsync,
// rename, fsync of the directory) and answers with the file's description
// instead: what a driver needs to commit the manifest.
type Save struct {
	Dir string
}

// Restore loads a Snapshot into a fresh stage — or, with Dir, the stage's
// shard File of the checkpoint directory Dir, verified against it; the
// stage answers Restored.
type Restore struct {
	Snapshot Snapshot
	Dir      string
	File     checkpoint.FileInfo
}

// Pull asks for the stage's current weights and BatchNorm statistics; the
// stage answers Pulled with them in Values: copies of its learnables, in
// order, then each BatchNorm op's running mean and variance.
type Pull struct{}

// Pulled answers Pull.
type Pulled struct{}

// Saved answers Save: the snapshot, or the shard written.
type Saved struct {
	Snapshot Snapshot
	File     checkpoint.FileInfo
}

// Restored answers Restore.
type Restored struct{}

// Refused answers a Save or Restore the stage cannot carry out (a solver
// that cannot save its state, a snapshot of another stage); the stage
// changed nothing and goes on serving.
type Refused struct {
	Message string
}

// Parked answers a Work: every action ran.
type Parked struct {
	Report Progress
}

// Evaluated answers Evaluate: the losses per evaluation microbatch (last
// stage only) and, in Values, for each probe this stage computes, in order,
// its value for every microbatch.
type Evaluated struct {
	Losses []float64
	Probes []int64
}

// Failed says the stage stopped on an error; it is the last message the
// stage sends.
type Failed struct {
	// InAction says the failure happened in Action; otherwise in handling
	// an order.
	InAction bool
	Action   schedule.Action
	// Step is the optimizer step the action belongs to.
	Step    int
	Message string
	// Peer is the other end of the link whose failure failed the action
	// (a stage that is gone), or −1: what a driver needs to tell a cause
	// from its consequences.
	Peer   int
	Report Progress
}

// Stopped is the stage's last message when it stops without a failure of
// its own (Stop, the driver gone, another stage's failure).
type Stopped struct {
	Report Progress
}

// Progress is what a stage reports with every answer: its cumulative
// statistics and what happened since its previous answer.
type Progress struct {
	Stats Stats
	// Events are the actions run since the previous answer.
	Events []Event
	// Losses are the last stage's losses of the forwards run since the
	// previous answer.
	Losses []Loss
	// Delays are the delays recorded since the previous answer (with
	// Config.DelayLog).
	Delays []Delay
}

// Loss is the loss of one microbatch.
type Loss struct {
	Micro int
	Value float64
}

// Delay is the delay one microbatch's forward saw: the stage's weight
// version at the update that applied its gradient minus the version its
// forward read.
type Delay struct {
	Micro, Delay int
}

// Event is one action a stage ran. Start is when its inputs had arrived,
// End when it finished.
type Event struct {
	Action     schedule.Action
	Schedule   string
	Start, End time.Time
}

// Stats are a stage's cumulative measurements.
type Stats struct {
	// Delays counts forwards by how many updates older than the weights
	// their gradient was applied to were the weights they read;
	// BackwardLag the same for the weights their backward read.
	Delays, BackwardLag map[int]int
	// Version is the number of updates the stage applied.
	Version int
	// ParamBytes, StateBytes (optimizer state) and CorrectionBytes (T2's
	// buffers) are what the stage's solver keeps; PeakWeightBytes and
	// PeakWeightVersions what weight stashing kept at most;
	// PeakActivationBytes the activations kept between forwards and
	// backwards at most; PeakDeferredBytes what split backwards held
	// between their I and W at most. SharedDelays counts, for the learnables the stage
	// replicates, the forwards by the delay they saw (the owner's version
	// at the update minus the version they read).
	ParamBytes, StateBytes, CorrectionBytes int64
	PeakWeightBytes                         int64
	PeakWeightVersions                      int
	PeakActivationBytes                     int64
	PeakDeferredBytes                       int64
	SharedDelays                            map[int]int
	// WeightPrograms counts the W's that computed the learnables'
	// gradients: ran the weight-gradient program (the split backward's
	// second half), or, at a recomputing first stage, the whole backward.
	// The other W's only added the gradients their I computed with the
	// whole backward.
	WeightPrograms int
	// DiscrepancySum and DiscrepancyCount accumulate
	// ‖u_bkwd − u_fwd‖/‖u_fwd‖ over stale backwards (Config.Discrepancy).
	DiscrepancySum   float64
	DiscrepancyCount int
}

func init() {
	for _, b := range []any{Work{}, Data{}, Evaluate{}, Stop{}, Save{}, Restore{}, Parked{}, Evaluated{}, Failed{}, Stopped{}, Saved{}, Restored{}, Refused{}, Pull{}, Pulled{}} {
		gob.Register(b)
	}
	gob.Register(&tensor.Dense{}) // snapshots hold tensor.Tensor values
}
