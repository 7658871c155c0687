package train

import (
	"encoding/json"
	"io"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/zoo"
)

// SavedEval is an evaluation of a trained model file and where it goes:
// what pipemare eval runs.
type SavedEval struct {
	// Weights is the model file (a run's model.safetensors).
	Weights string
	// Rows is the rows of an evaluation batch (0: the recipe's
	// microbatch).
	Rows int
	// Data names where the test examples came from, for the record.
	Data string
	// Predictions, when set, is the file every prediction is written to
	// (WritePredictions: .csv, else JSON lines); the Evaluation names it.
	Predictions string
	// JSON, when set, is the file the Evaluation is written to, indented
	// JSON, atomically (checkpoint.WriteFile), instead of the writer Run
	// is given.
	JSON string
}

// Run measures the accuracy on test of s.Weights loaded into r's model
// (EvaluateFile), writes the predictions when asked, and writes the
// Evaluation, indented JSON and a newline, to s.JSON or else to w. It
// checks that s.Predictions and s.JSON can be written before it loads or
// evaluates anything, and writes nothing when the evaluation fails.
func (s SavedEval) Run(w io.Writer, r zoo.Recipe, test zoo.Data) error {
	for _, out := range []struct{ setting, path string }{{"predictions", s.Predictions}, {"json", s.JSON}} {
		if out.path == "" {
			continue
		}
		if err := checkpoint.CheckWritable(out.path); err != nil {
			return &runspec.Error{Setting: out.setting, Value: out.path, Reason: "cannot be written (nothing was evaluated)", Err: err}
		}
	}
	rows := r.Run.Microbatch
	if s.Rows > 0 {
		rows = s.Rows
	}
	ev, ps, err := EvaluateFile(r, s.Weights, rows, s.Data, test, s.Predictions != "")
	if err != nil {
		return err
	}
	if s.Predictions != "" {
		ev.Predictions = s.Predictions
		if err := WritePredictions(s.Predictions, ps); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(ev, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if s.JSON != "" {
		return checkpoint.WriteFile(s.JSON, b)
	}
	_, err = w.Write(b)
	return err
}
