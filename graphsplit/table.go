package graphsplit

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes one row per stage: ops, learnables, parameter count,
// estimated FLOPs, activation bytes in and out, stateful ops, and the
// stage's share of the cost model. It is what String returns.
func (p *Plan) WriteTable(w io.Writer) error {
	total := 0.0
	for _, s := range p.Stages {
		total += s.Cost.Model
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\tops\tlearnables\tparams\tMFLOPs\tin KiB\tout KiB\tshare\tstateful\t")
	for _, s := range p.Stages {
		share := 0.0
		if total > 0 {
			share = 100 * s.Cost.Model / total
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%.3f\t%.1f\t%.1f\t%.1f%%\t%s\t\n",
			s.Index, len(s.Nodes), names(s), s.NumParams(), float64(s.Cost.FLOPs)/1e6,
			float64(s.Cost.InBytes)/1024, float64(s.Cost.OutBytes)/1024, share, statefulKinds(s))
	}
	return tw.Flush()
}

// String returns the stage table.
func (p *Plan) String() string {
	var b strings.Builder
	_ = p.WriteTable(&b)
	return b.String()
}

func names(s *Stage) string {
	var out []string
	for _, l := range s.Learnables {
		out = append(out, l.Name())
	}
	if len(out) == 0 {
		return "-"
	}
	const max = 3
	if len(out) > max {
		return strings.Join(out[:max], ",") + fmt.Sprintf(",+%d", len(out)-max)
	}
	return strings.Join(out, ",")
}

func statefulKinds(s *Stage) string {
	if len(s.Stateful) == 0 {
		return "-"
	}
	seen := make(map[string]bool)
	var out []string
	for _, n := range s.Stateful {
		k := strings.Fields(n.Op().String())[0]
		if i := strings.IndexAny(k, "({"); i > 0 {
			k = k[:i]
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return strings.Join(out, ",")
}
