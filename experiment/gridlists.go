package experiment

import (
	"github.com/pkg/errors"
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
// setting. Errors name the flags
// and quote what was given.
func (l GridLists) Parse(g *Grid) error {
	var err error
	if g.Methods, err = ParseVariants(l.Methods, g.Baseline); err != nil {
		return errors.Wrap(err, "-methods")
	}
	if g.Settings, err = ParseSettings(l.Microbatches, l.Delays); err == nil && len(g.Settings) == 0 {
		err = errors.New("no setting")
	}
	if err != nil {
		return errors.Wrap(err, "-microbatches and -delays")
	}
	if g.Epochs, err = ParseEpochs(l.Epochs); err != nil {
		return errors.Wrapf(err, "-epochs %q", l.Epochs)
	}
	if g.Seeds, err = ParseSeeds(l.Seeds); err != nil {
		return errors.Wrapf(err, "-seeds %q", l.Seeds)
	}
	if g.CheckpointEvery < 0 {
		return errors.Errorf("-checkpoint-every %d: a number of steps (0: no checkpoints)", g.CheckpointEvery)
	}
	return nil
}
