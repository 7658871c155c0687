package graphsplit

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"
)

// WriteBalance writes each stage's measured forward and backward time for
// one microbatch (times, from Time or Balance.Times) and what they make of
// a pipeline with one device per stage: the slowest stage sets the pace,
// so stage i is busy t_i / max t. A measured cut (Balance) is named as
// the op positions to reproduce it, with each worker's share when the
// stages share workers (OnWorkers); a cut that leaves most stages less
// than half busy says how few stages would hold the work at the slowest
// one's pace. It returns the first write error.
func (p *Plan) WriteBalance(w io.Writer, times []StageTime) error {
	var total, most time.Duration
	for _, t := range times {
		total += t.Total()
		most = max(most, t.Total())
	}
	if most == 0 {
		return errors.New("graphsplit: WriteBalance: no stage took any time")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nmeasured on this machine, one microbatch, one thread (a stage of a pipeline has about a core):\n")
	fmt.Fprintf(&b, "  stage  forward ms  backward ms  share  busy with a device per stage\n")
	idle := 0
	for i, t := range times {
		busy := float64(t.Total()) / float64(most)
		if busy < 0.5 {
			idle++
		}
		fmt.Fprintf(&b, "  %5d  %10.3f  %11.3f  %4.0f%%  %.2f\n", i, ms(t.Forward), ms(t.Backward), 100*float64(t.Total())/float64(total), busy)
	}
	n := len(times)
	fmt.Fprintf(&b, "one device per stage: %.2f busy on average, %.2f× one device", float64(total)/float64(most)/float64(n), float64(total)/float64(most))
	switch k := int(total / most); {
	case p.Balance != nil:
		cut := make([]string, len(p.Cuts()))
		for i, c := range p.Cuts() {
			cut[i] = strconv.Itoa(c)
		}
		fmt.Fprintf(&b, "; balanced by measuring (%s): cut before ops %s\n", p.Balance, strings.Join(cut, ","))
		writeWorkers(&b, p.Balance.Workers, times, total)
	case n > 1 && idle > n/2 && k < n:
		fmt.Fprintf(&b, "\n%d of %d stages are less than half busy: the slowest holds %.0f%% of the work, so %d stages at its pace would hold all of it and go as fast (a plan of %d stages balanced by measuring would)\n", idle, n, 100*float64(most)/float64(total), max(k, 1), max(k, 1))
	default:
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeWorkers writes each worker's stages and share of total, for stages
// placed on workers (Balance.Workers; nothing when nil).
func writeWorkers(b *strings.Builder, workers []int, times []StageTime, total time.Duration) {
	if workers == nil {
		return
	}
	hosts := make([][]string, slices.Max(workers)+1)
	load := make([]time.Duration, len(hosts))
	for s, w := range workers {
		hosts[w] = append(hosts[w], strconv.Itoa(s))
		load[w] += times[s].Total()
	}
	parts := make([]string, len(hosts))
	for w := range hosts {
		parts[w] = fmt.Sprintf("worker %d (stages %s) %.0f%%", w, strings.Join(hosts[w], ","), 100*float64(load[w])/float64(total))
	}
	fmt.Fprintf(b, "each worker runs its stages in turn: %s\n", strings.Join(parts, ", "))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
