package experiment

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Markdown is the summary as tables, a section per setting: the final
// accuracy of each variant at each length, its gap to the baseline, the
// length from which it stays within Tolerance points, and the time to the
// target accuracy.
func (rep *Report) Markdown() string {
	var b strings.Builder
	seeds := make([]string, len(rep.Seeds))
	for i, s := range rep.Seeds {
		seeds[i] = strconv.FormatInt(s, 10)
	}
	fmt.Fprintf(&b, "%s, %d stages, data %s (%d steps an epoch), seeds %s", rep.Model, rep.Stages, rep.Data, rep.StepsPerEpoch, strings.Join(seeds, ", "))
	if rep.CheckpointEvery > 0 {
		fmt.Fprintf(&b, ", a checkpoint every %d steps", rep.CheckpointEvery)
	}
	b.WriteString(".\n")
	for s, set := range rep.Settings {
		fmt.Fprintf(&b, "\n## %s (τ₀ = %g)\n\n", set.Label, set.Tau0)
		b.WriteString("Final test accuracy (the trained model's), mean ± std over the seeds that finished (n):\n\n")
		rep.table(&b, s, accuracyCell)
		fmt.Fprintf(&b, "\nGap to %s in points (100 × accuracy difference, seed by seed), mean ± std (n), and the run's asynchronous steps:\n\n", rep.Baseline)
		rep.table(&b, s, gapCell)
		fmt.Fprintf(&b, "\nWithin %g point of %s:\n\n", rep.Tolerance, rep.Baseline)
		for _, w := range rep.Within {
			if w.Setting == set.Label {
				b.WriteString(withinLine(w, rep.Tolerance))
			}
		}
		fmt.Fprintf(&b, "\nTraining time to %.2f, mean over the seeds that reached it (k/n reached):\n\n", rep.TargetAccuracy)
		rep.table(&b, s, targetCell)
	}
	var notes []string
	seen := map[string]bool{}
	for _, c := range rep.Cells {
		if c.Refused != "" && !seen[c.Method+c.Setting] {
			seen[c.Method+c.Setting] = true
			notes = append(notes, fmt.Sprintf("- n/a, %s at %s: %s", c.Method, c.Setting, c.Refused))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n" + strings.Join(notes, "\n") + "\n")
	}
	return b.String()
}

// table writes a row per variant and a column per length at setting s.
func (rep *Report) table(b *strings.Builder, s int, cell func(Cell) string) {
	b.WriteString("| method |")
	for _, e := range rep.Epochs {
		fmt.Fprintf(b, " %s (%d steps) |", epochs(e), e*rep.StepsPerEpoch)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(rep.Epochs)) + "\n")
	for m, name := range rep.Methods {
		fmt.Fprintf(b, "| %s |", name)
		for e := range rep.Epochs {
			fmt.Fprintf(b, " %s |", cell(*rep.cell(s, e, m)))
		}
		b.WriteString("\n")
	}
}

// pending is a cell's text when it has no result: "n/a" when the variant
// cannot run there, "…" when no seed finished, "" otherwise.
func pending(c Cell) string {
	switch {
	case c.Refused != "":
		return "n/a"
	case len(c.Accuracies) == 0 && c.Diverged == 0:
		return "…"
	}
	return ""
}

func accuracyCell(c Cell) string {
	if p := pending(c); p != "" {
		return p
	}
	s := "—"
	if len(c.Accuracies) > 0 {
		s = fmt.Sprintf("%.4f ± %.4f (%d)", c.Mean, c.Std, len(c.Accuracies))
	}
	if c.Diverged > 0 {
		s += fmt.Sprintf(", %d diverged", c.Diverged)
	}
	return s
}

func gapCell(c Cell) string {
	if p := pending(c); p != "" {
		return p
	}
	if c.Gap == nil {
		return "—"
	}
	return fmt.Sprintf("%+.2f ± %.2f (%d), %d async", c.Gap.Mean, c.Gap.Std, len(c.Gap.Points), c.AsyncSteps)
}

func targetCell(c Cell) string {
	if p := pending(c); p != "" {
		return p
	}
	n := len(c.Accuracies) + c.Diverged
	if c.Reached == 0 {
		return fmt.Sprintf("— (0/%d)", n)
	}
	return fmt.Sprintf("%v (%d/%d)", c.TimeToTarget.Round(time.Second), c.Reached, n)
}

// withinLine is a bullet saying from which length a variant stays within
// the tolerance.
func withinLine(w Within, tolerance float64) string {
	measured := make([]string, len(w.Measured))
	for i, e := range w.Measured {
		measured[i] = strconv.Itoa(e)
	}
	lengths := strings.Join(measured, ", ") + " epochs"
	if len(w.Measured) == 1 {
		lengths = epochs(w.Measured[0])
	}
	switch {
	case len(w.Measured) == 0:
		return fmt.Sprintf("- %s: no gap measured yet\n", w.Method)
	case w.Epochs == 0:
		return fmt.Sprintf("- %s: not within %g point at the lengths measured (%s)\n", w.Method, tolerance, lengths)
	}
	return fmt.Sprintf("- %s: from %s (%d asynchronous steps) on, of the lengths measured (%s)\n", w.Method, epochs(w.Epochs), w.AsyncSteps, lengths)
}

// epochs is "1 epoch" or "n epochs".
func epochs(n int) string {
	if n == 1 {
		return "1 epoch"
	}
	return strconv.Itoa(n) + " epochs"
}
