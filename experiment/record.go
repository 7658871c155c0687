package experiment

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/runout"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/train"
	"github.com/pkg/errors"
)

// Record is a finished run as the run cache keeps it: a few hundred bytes
// (no losses, no events), what the sweep's statistics need and the
// specification that says which run it is. Its JSON keys are the tags; durations are
// integer nanoseconds.
type Record struct {
	// Method is the variant's text form, Setting the setting's label.
	Method  string `json:"method"`
	Setting string `json:"setting"`
	Epochs  int    `json:"epochs"`
	Seed    int64  `json:"seed"`
	// Spec is the run's specification (Grid.plan: what pipemare train
	// trains alike, with -checkpoint-every CheckpointEvery): a cached run
	// is reused only for the same.
	Spec            runspec.Spec `json:"spec"`
	CheckpointEvery int          `json:"checkpoint_every,omitempty"`
	// Steps are the optimizer steps, Warmup those of the synchronous
	// warm-up, AsyncSteps those of an asynchronous schedule after it (0
	// for a synchronous run), T1 T1's K.
	Steps      int `json:"steps"`
	Warmup     int `json:"warmup_steps"`
	AsyncSteps int `json:"async_steps"`
	T1         int `json:"t1_steps"`
	// Refused says why the method cannot train this run, Diverged that
	// its loss stopped being finite (the error); either way there is no
	// accuracy.
	Refused  string `json:"refused,omitempty"`
	Diverged string `json:"diverged,omitempty"`
	// Accuracy is the test accuracy of the model the run ends with (after
	// the final flush: train.Result.ModelAccuracy); EpochAccuracy the test
	// accuracy after each epoch (with an asynchronous schedule's last
	// updates still in flight), EpochLoss each epoch's mean loss.
	Accuracy      float64   `json:"final_accuracy,omitempty"`
	EpochAccuracy []float64 `json:"epoch_accuracy,omitempty"`
	EpochLoss     []float64 `json:"epoch_loss,omitempty"`
	// TrainTime is the epochs' training time (evaluation excluded),
	// summed over the sessions a resumed run trained in; TimeToTarget the
	// same until the first epoch at the grid's target (0: never).
	TrainTime    time.Duration `json:"train_ns,omitempty"`
	TimeToTarget time.Duration `json:"time_to_target_ns,omitempty"`
	// WeightsSHA256 is the trained weights' hash (train.Result).
	WeightsSHA256 string `json:"weights_sha256,omitempty"`
	// ResumedAt are the steps of the checkpoints the run went on from
	// (none: it trained in one go).
	ResumedAt []int `json:"resumed_at_steps,omitempty"`
}

// ok reports whether the run trained to the end.
func (r *Record) ok() bool { return r.Refused == "" && r.Diverged == "" }

// fill sets the record's results from a finished run.
func (r *Record) fill(res *train.Result, target float64) {
	r.Accuracy, r.WeightsSHA256 = res.ModelAccuracy, res.WeightsSHA256
	r.EpochAccuracy, r.EpochLoss, r.TrainTime = nil, nil, 0
	for _, e := range res.Epochs {
		r.EpochAccuracy = append(r.EpochAccuracy, e.Accuracy)
		r.EpochLoss = append(r.EpochLoss, e.Loss)
		r.TrainTime += e.Wall
	}
	r.TimeToTarget = runout.TimeToTarget(res, target)
}

// Cache is a run cache: a directory holding a Record per finished run,
// runs/<key>.json. Several sweeps of a model may share one, so that a run
// two of them need trains once.
type Cache struct{ Dir string }

// Load returns the record of the run key when it finished before as the
// run now (the same Spec and CheckpointEvery); nil when it did not finish.
// A record of another run is an error naming the file and the settings
// that differ (another grid's run under the same key, or a record written
// before records carried their spec).
func (c Cache) Load(key string, now Record) (*Record, error) {
	path := filepath.Join(c.Dir, key+".json")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errors.Wrap(err, "run cache")
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, errors.Wrapf(err, "run cache: %s (delete it to train the run again)", path)
	}
	d := runspec.Diff(r.Spec, now.Spec)
	if r.CheckpointEvery != now.CheckpointEvery {
		d = append(d, runspec.Difference{Setting: "checkpoint_every", Then: strconv.Itoa(r.CheckpointEvery), Now: strconv.Itoa(now.CheckpointEvery)})
	}
	if d != nil {
		return nil, &runspec.DiffError{Before: "run cache: " + path + " is another run: ", Differences: d, After: "; give another cache directory, or delete it"}
	}
	return &r, nil
}

// Save writes the record of the run key, atomically (a crash leaves it
// whole or absent).
func (c Cache) Save(key string, r *Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return errors.Wrapf(err, "run cache: %s", key)
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return errors.Wrap(err, "run cache")
	}
	return errors.Wrap(checkpoint.WriteFile(filepath.Join(c.Dir, key+".json"), append(b, '\n')), "run cache")
}
