package train

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"path/filepath"
	"strconv"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/zoo"
)

// Evaluation is the test accuracy of a trained model file (a run's
// model.safetensors, checkpoint.SaveModel) loaded into a freshly built zoo
// model: what pipemare eval writes.
type Evaluation struct {
	Model string `json:"model"`
	// Weights is the model file; WeightsSHA256 the hash of the learnables
	// it loaded (graphsplit.Plan.WeightsSHA256: the weights_sha256 of the
	// run that wrote it).
	Weights       string `json:"weights"`
	WeightsSHA256 string `json:"weights_sha256"`
	Data          string `json:"data"`
	TestExamples  int    `json:"test_examples"`
	// TestAccuracy is Evaluator.Accuracy over the test examples: for the
	// model a run wrote, evaluated on the same test examples, its
	// report's model_test_accuracy (final_accuracy is measured before the
	// last updates in flight are applied).
	TestAccuracy float64 `json:"test_accuracy"`
	// Predictions is the file the predictions were written to, if any.
	Predictions string `json:"predictions,omitempty"`
}

// EvaluateFile builds r's model at rows rows a batch, loads the weights in
// the model file into it and measures its accuracy on test; with
// predictions set, it returns every prediction too. data names where test
// came from, for the record.
func EvaluateFile(r zoo.Recipe, weights string, rows int, data string, test zoo.Data, predictions bool) (Evaluation, []Prediction, error) {
	ev := Evaluation{Model: r.Model, Weights: weights, Data: data, TestExamples: test.Len()}
	m, err := r.Build(rows, 1)
	if err != nil {
		return ev, nil, err
	}
	if err := checkpoint.LoadModel(weights, m.Learnables); err != nil {
		return ev, nil, &runspec.Error{Setting: "weights", Err: err}
	}
	if ev.WeightsSHA256, err = (&graphsplit.Plan{Learnables: m.Learnables}).WeightsSHA256(); err != nil {
		return ev, nil, err
	}
	e, err := NewEvaluator(m)
	if err != nil {
		return ev, nil, err
	}
	defer e.Close()
	if ev.TestAccuracy, err = e.Accuracy(test); err != nil {
		return ev, nil, err
	}
	if !predictions {
		return ev, nil, nil
	}
	ps, err := e.Predictions(test)
	return ev, ps, err
}

// WritePredictions writes ps to path, atomically (checkpoint.WriteFile):
// CSV with a header for a .csv path, one JSON object a line otherwise.
func WritePredictions(path string, ps []Prediction) error {
	var buf bytes.Buffer
	if filepath.Ext(path) != ".csv" {
		enc := json.NewEncoder(&buf)
		for _, p := range ps {
			if err := enc.Encode(p); err != nil {
				return err
			}
		}
	} else {
		w := csv.NewWriter(&buf)
		_ = w.Write([]string{"example", "position", "target", "predicted"})
		for _, p := range ps {
			_ = w.Write([]string{strconv.Itoa(p.Example), strconv.Itoa(p.Position), strconv.Itoa(p.Target), strconv.Itoa(p.Predicted)})
		}
		w.Flush()
		if err := w.Error(); err != nil {
			return err
		}
	}
	if err := checkpoint.WriteFile(path, buf.Bytes()); err != nil {
		return &runspec.Error{Setting: "predictions", Err: err}
	}
	return nil
}
