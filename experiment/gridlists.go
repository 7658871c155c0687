package experiment

import (
	"github.com/pipemare/pipemare/runspec"
	"github.com/pkg/errors"
	"strconv"
)

// GridLists are the lists of a Grid as pipemare sweep's flags give them,
// comma-separated: the variants (-methods: ParseVariants), the settings
// (-microbatches, values of N, and -delays, injected delays:
// ParseSettings), the run lengths (-epochs: ParseEpochs) and the seeds
// (-seeds: ParseSeeds).
type GridLists struct {
	Methods, Microbatches, Delays, Epochs, Seeds string
}

// Parse sets g's Methods, Settings (not yet filled), Epochs and Seeds from
// the lists, and checks g's CheckpointEvery. The variants must hold
// g.Baseline as given (-baseline), and there must be at least one
// setting. Errors are *runspec.Error naming the setting and quoting what
// was given.
func (l GridLists) Parse(g *Grid) error {
	var err error
	if g.Methods, err = ParseVariants(l.Methods, g.Baseline); err != nil {
		return &runspec.Error{Setting: "methods", Err: err}
	}
	if g.Settings, err = ParseSettings(l.Microbatches, l.Delays); err == nil && len(g.Settings) == 0 {
		err = errors.New("no setting")
	}
	if err != nil {
		return &runspec.Error{Setting: "microbatches", Value: "and {delays}", Err: err}
	}
	if g.Epochs, err = ParseEpochs(l.Epochs); err != nil {
		return &runspec.Error{Setting: "epochs", Value: strconv.Quote(l.Epochs), Err: err}
	}
	if g.Seeds, err = ParseSeeds(l.Seeds); err != nil {
		return &runspec.Error{Setting: "seeds", Value: strconv.Quote(l.Seeds), Err: err}
	}
	if g.CheckpointEvery < 0 {
		return &runspec.Error{Setting: "checkpoint_every", Value: strconv.Itoa(g.CheckpointEvery), Reason: "a number of steps (0: no checkpoints)"}
	}
	return nil
}
