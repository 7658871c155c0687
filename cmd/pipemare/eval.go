package main

import (
	"context"
	"flag"
	"io"
	"path/filepath"

	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// evalCmd loads a trained model (train's model.safetensors) into a fresh
// zoo model and measures its test accuracy (train.SavedEval).
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
	_, test, err := loadData(r, *data, 0, *testLimit)
	if err != nil {
		return err
	}
	return train.SavedEval{Weights: *weights, Rows: *microbatch, Data: *data, Predictions: *predictions, JSON: *jsonOut}.Run(stdout, r, test)
}
