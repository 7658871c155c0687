package runout

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
)

// Compared is one run of a comparison of schedules (pipemare compare):
// its label, its configuration and, once trained, its result.
type Compared struct {
	Label  string
	Config train.Config
	Result *train.Result
}

// CompareRuns are the runs that compare every schedule on the same
// settings: config(s) is the run of schedule s (with the techniques the
// settings turn on), trained once per schedule, with PipeMare's techniques
// off for the weight-stashing schedules (they are for PipeMare), and
// PipeMare twice — naive, and with the techniques on, labelled by them.
// A run whose schedule needs more microbatches than it has on p stages
// (schedule.MinN) is left out: it is in left. Schedules that place several
// stages on a worker, which the engine does not run, are not compared.
func CompareRuns(config func(schedule.Schedule) (train.Config, error), p int) (runs, left []Compared, err error) {
	for _, s := range schedule.All() {
		if s.Virtual() > 1 {
			continue
		}
		cfg, err := config(s)
		if err != nil {
			return nil, nil, err
		}
		if s.StashWeights {
			cfg = cfg.WithoutTechniques()
		}
		var these []Compared
		if s.Name != schedule.PipeMare().Name {
			these = []Compared{{Label: s.Name, Config: cfg}}
		} else {
			these = []Compared{{Label: "pipemare (naive)", Config: cfg.WithoutTechniques()}}
			if label := RunLabel(cfg); label != s.Name {
				these = append(these, Compared{Label: label, Config: cfg})
			}
		}
		for _, c := range these {
			if c.Config.Microbatches < schedule.MinN(c.Config.Schedule, p) {
				left = append(left, c)
				continue
			}
			runs = append(runs, c)
		}
	}
	return runs, left, nil
}

// RunLabel names a run by its schedule and the techniques it has on:
// "pipemare +T1+T2+W", "pipemare +T1+spike+W", "gpipe".
func RunLabel(cfg train.Config) string {
	label := ""
	for _, t := range []struct {
		on   bool
		name string
	}{{cfg.T1 > 0, "+T1"}, {cfg.T2 > 0, "+T2"}, {cfg.Spike, "+spike"}, {cfg.Predict, "+predict"}, {cfg.Warmup > 0, "+W"}} {
		if t.on {
			label += t.name
		}
	}
	if label == "" {
		return cfg.Schedule.Name
	}
	return cfg.Schedule.Name + " " + label
}

// TraceFile is the name of a compared run's Chrome trace.
func (c Compared) TraceFile() string {
	slug := strings.NewReplacer(" ", "-", "+", "", "(", "", ")", "").Replace(strings.ToLower(c.Label))
	return "trace-" + slug + ".json"
}

// CompareTable writes the table of trained runs: accuracy, speed,
// utilization measured and replayed, memory, and the training time until
// the test accuracy first reached target ("—": never).
func CompareTable(w io.Writer, runs []Compared, target float64) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "schedule\taccuracy\tsamples/s\tutilization\tvirtual util.\tvirtual samples/s\tmemory KiB\tweights KiB\tactivations KiB\ttime to %.2f\t\n", target)
	for _, c := range runs {
		res := c.Result
		tta := "—"
		if d := TimeToTarget(res, target); d > 0 {
			tta = d.Round(10 * time.Millisecond).String()
		}
		v, mem := res.Virtual, res.Report.Memory
		fmt.Fprintf(tw, "%s\t%.4f\t%.0f\t%.3f\t%.3f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t\n", c.Label, res.Accuracy,
			res.Epochs[len(res.Epochs)-1].SamplesPerSec, res.Report.Utilization, v.Utilization, v.SamplesPerSec,
			float64(mem.Total())/1024, float64(mem.StashedWeights)/1024, float64(mem.StashedActivation)/1024, tta)
	}
	return tw.Flush()
}
