package experiment

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/checkpoint"
)

// Tolerance is the gap, in points, within which a variant counts as having
// caught up with the baseline (Within).
const Tolerance = 1.0

// Report is a sweep's summary, sweep.json. Its JSON keys are the tags.
type Report struct {
	Model string `json:"model"`
	Data  string `json:"data"`
	// Stages is P; StepsPerEpoch the optimizer steps an epoch has at the
	// recipe's minibatch, which every setting keeps.
	Stages        int `json:"stages"`
	StepsPerEpoch int `json:"steps_per_epoch"`
	// Baseline is the variant gaps are measured against; Tolerance the
	// points of Within.
	Baseline  string  `json:"baseline"`
	Tolerance float64 `json:"tolerance_points"`
	// TargetAccuracy is the accuracy the cells' TimeToTarget times.
	TargetAccuracy  float64   `json:"target_accuracy"`
	CheckpointEvery int       `json:"checkpoint_every"`
	Methods         []string  `json:"methods"`
	Settings        []Setting `json:"settings"`
	Epochs          []int     `json:"epochs"`
	Seeds           []int64   `json:"seeds"`
	// Cells are every setting × length × method, in that order (the
	// method varying fastest).
	Cells []Cell `json:"cells"`
	// Within is every variant but the baseline at every setting.
	Within []Within `json:"within"`
}

// cell returns the cell of method m at setting s and length e.
func (rep *Report) cell(s, e, m int) *Cell {
	return &rep.Cells[(s*len(rep.Epochs)+e)*len(rep.Methods)+m]
}

// summarise fills the cells, gaps and Within from the finished records
// (by run key; absent: not finished).
func (rep *Report) summarise(runs []Run, done map[string]*Record) {
	rep.Cells, rep.Within = nil, nil
	for _, s := range rep.Settings {
		for _, e := range rep.Epochs {
			for _, m := range rep.Methods {
				var recs []*Record
				for _, r := range runs {
					if rec := done[r.Key()]; rec != nil && r.Setting.Label == s.Label && r.Epochs == e && r.Variant.String() == m {
						recs = append(recs, rec)
					}
				}
				rep.Cells = append(rep.Cells, newCell(m, s.Label, e, recs))
			}
		}
	}
	base := -1
	for i, m := range rep.Methods {
		if m == rep.Baseline {
			base = i
		}
	}
	for s := range rep.Settings {
		for m := range rep.Methods {
			if base < 0 || m == base {
				continue
			}
			var cells []Cell
			for e := range rep.Epochs {
				c := rep.cell(s, e, m)
				c.Gap = gap(*c, *rep.cell(s, e, base))
				cells = append(cells, *c)
			}
			rep.Within = append(rep.Within, within(cells, rep.Tolerance))
		}
	}
}

// Files are what WriteReport writes into a sweep's directory.
var Files = []string{"sweep.json", "sweep.md", "sweep.svg", "gap.svg"}

// WriteReport writes rep into dir: sweep.json, sweep.md (the tables),
// sweep.svg (accuracy against τ_0 at the longest length, and after each
// epoch) and gap.svg (the gap against asynchronous steps).
func WriteReport(dir string, rep *Report) error {
	if err := writeJSON(filepath.Join(dir, "sweep.json"), rep); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sweep.md"), []byte(rep.Markdown()), checkpoint.FileMode); err != nil {
		return errors.Wrap(err, "sweep")
	}
	if err := AccuracyPlot(filepath.Join(dir, "sweep.svg"), rep); err != nil {
		return errors.Wrap(err, "sweep.svg")
	}
	return errors.Wrap(GapPlot(filepath.Join(dir, "gap.svg"), rep), "gap.svg")
}

// CheckWritable creates dir and checks that each of the files can be
// written there, before anything trains, leaving existing files as they
// are.
func CheckWritable(dir string, files []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range files {
		path := filepath.Join(dir, name)
		if err := checkpoint.CheckWritable(path); err != nil {
			return errors.Wrapf(err, "cannot write %s", strings.TrimPrefix(path, dir+"/"))
		}
	}
	return nil
}
