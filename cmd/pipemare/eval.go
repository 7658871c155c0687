package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// evalReport is what pipemare eval writes: the test accuracy of a trained
// model, loaded into a freshly built zoo model.
type evalReport struct {
	Model string `json:"model"`
	// Weights is the model file; WeightsSHA256 the hash of the learnables
	// it loaded (graphsplit.Plan.WeightsSHA256: the weights_sha256 of the
	// run that wrote it).
	Weights       string `json:"weights"`
	WeightsSHA256 string `json:"weights_sha256"`
	Data          string `json:"data"`
	TestExamples  int    `json:"test_examples"`
	// TestAccuracy is train.Evaluator.Accuracy over the test examples: for
	// the model a run wrote, evaluated on the same test examples, its
	// report's model_test_accuracy (final_accuracy is measured before the
	// last updates in flight are applied).
	TestAccuracy float64 `json:"test_accuracy"`
	// Predictions is the file -predictions wrote, if any.
	Predictions string `json:"predictions,omitempty"`
}

// evalCmd loads a trained model (train's model.safetensors) into a fresh
// zoo model and measures its test accuracy.
func evalCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare eval", flag.ContinueOnError)
	model := fs.String("model", "resnet", modelUsage("the one the weights are of"))
	data := fs.String("data", "embedded", "data: embedded, auto or a directory, as for train")
	microbatch := fs.Int("microbatch", 0, "rows per evaluation batch: the -microbatch the model trained with (0: the model's recipe)")
	testLimit := fs.Int("test-limit", 0, "only the first n test examples (0: all)")
	weights := fs.String("weights", "", "the trained model: model.safetensors in the -out of a train run (required)")
	predictions := fs.String("predictions", "", "also write every prediction (example, position, target, predicted) to this file: .csv or .jsonl")
	jsonOut := fs.String("json", "", "write the result, JSON, to this file instead of stdout")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	r, err := zoo.RecipeFor(*model)
	if err != nil {
		return usageError(fs, "-model %q: %v", *model, err)
	}
	switch ext := filepath.Ext(*predictions); {
	case *weights == "":
		return usageError(fs, "-weights is required: the model file (model.safetensors of a train run)")
	case *microbatch < 0:
		return usageError(fs, "-microbatch %d: must be positive (or 0 for the recipe's)", *microbatch)
	case *testLimit < 0:
		return usageError(fs, "-test-limit %d: must be positive (or 0 for all)", *testLimit)
	case *predictions != "" && ext != ".csv" && ext != ".jsonl":
		return usageError(fs, "-predictions %s: a .csv or a .jsonl file", *predictions)
	}
	rows := r.Run.Microbatch
	if *microbatch > 0 {
		rows = *microbatch
	}
	_, test, err := loadData(r, *data, 0, *testLimit)
	if err != nil {
		return err
	}
	m, err := r.Build(rows, 1)
	if err != nil {
		return err
	}
	if err := checkpoint.LoadModel(*weights, m.Learnables); err != nil {
		return fmt.Errorf("-weights: %w", err)
	}
	hash, err := (&graphsplit.Plan{Learnables: m.Learnables}).WeightsSHA256()
	if err != nil {
		return err
	}
	e, err := train.NewEvaluator(m)
	if err != nil {
		return err
	}
	defer e.Close()
	rep := evalReport{Model: r.Model, Weights: *weights, WeightsSHA256: hash, Data: *data, TestExamples: test.Len(), Predictions: *predictions}
	if rep.TestAccuracy, err = e.Accuracy(test); err != nil {
		return err
	}
	if *predictions != "" {
		ps, err := e.Predictions(test)
		if err != nil {
			return err
		}
		if err := writePredictions(*predictions, ps); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if *jsonOut != "" {
		return checkpoint.WriteFile(*jsonOut, b)
	}
	_, err = stdout.Write(b)
	return err
}

// writePredictions writes ps to path: CSV with a header, or one JSON
// object a line.
func writePredictions(path string, ps []train.Prediction) error {
	var buf bytes.Buffer
	if filepath.Ext(path) == ".jsonl" {
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
		return fmt.Errorf("-predictions: %w", err)
	}
	return nil
}
