package graphsplit

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes one row per stage: ops, learnables, parameter count
// (replicas included), estimated FLOPs, activation bytes in and out, the
// stage's share of the cost model and its stateful ops. When learnables are
// shared a last column lists, per stage, the shared ones it owns with the
// stages holding replicas ("E→3") and its replicas with their owner
// ("E←0"). It is what String returns.
func (p *Plan) WriteTable(w io.Writer) error {
	total := 0.0
	for _, s := range p.Stages {
		total += s.Cost.Model
	}
	shared := len(p.Shared) > 0
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "stage\tops\tlearnables\tparams\tMFLOPs\tin KiB\tout KiB\tshare\tstateful\t")
	if shared {
		fmt.Fprint(tw, "shared\t")
	}
	fmt.Fprintln(tw)
	for _, s := range p.Stages {
		share := 0.0
		if total > 0 {
			share = 100 * s.Cost.Model / total
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%.3f\t%.1f\t%.1f\t%.1f%%\t%s\t",
			s.Index, len(s.Nodes), names(s), s.NumParams(), float64(s.Cost.FLOPs)/1e6,
			float64(s.Cost.InBytes)/1024, float64(s.Cost.OutBytes)/1024, share, statefulKinds(s))
		if shared {
			fmt.Fprintf(tw, "%s\t", sharedOf(s))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// sharedOf lists the stage's shared learnables: "E→2,3" where it owns E
// and stages 2 and 3 hold replicas, "E←0" where it holds a replica of
// stage 0's E.
func sharedOf(s *Stage) string {
	var out []string
	for i, sh := range s.Shared {
		switch {
		case sh == nil:
		case s.Replica(i):
			out = append(out, fmt.Sprintf("%s←%d", sh.Node.Name(), sh.Owner))
		default:
			var rs []string
			for _, r := range sh.Replicas() {
				rs = append(rs, fmt.Sprint(r))
			}
			out = append(out, sh.Node.Name()+"→"+strings.Join(rs, ","))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, " ")
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
