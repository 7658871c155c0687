package experiment

import (
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// GapPlot draws the gap to the baseline against run length (an SVG, or a
// PNG for a path ending in .png), a
// panel per setting: for each variant, a line through the mean gap (points)
// at each length measured, placed at the run's asynchronous steps (its
// steps for a synchronous variant), with error bars of one standard
// deviation and a small mark per seed; dashed lines at 0 and at
// −Tolerance. The x axis is logarithmic when the lengths span a factor of
// 4 or more.
func GapPlot(path string, rep *Report) error {
	const panelW, panelH = 8.6 * vg.Inch, 4.5 * vg.Inch
	height := panelH * vg.Length(max(1, len(rep.Settings)))
	panels := make([]*plot.Plot, len(rep.Settings))
	l := newSideLegend()
	for s := range rep.Settings {
		p, entries, err := gapPanel(rep, s)
		if err != nil {
			return err
		}
		panels[s] = p
		if s == 0 {
			for _, e := range entries {
				l.Add(e.name, e.thumb)
			}
		}
	}
	width := panelW + l.Width()
	img := newCanvas(path, width, height)
	dc := draw.New(img)
	for s, p := range panels {
		top := vg.Length(s) * panelH
		p.Draw(draw.Crop(dc, 0, -l.Width(), height-top-panelH, -top-vg.Points(4)))
	}
	l.DrawRight(dc, 12)
	return writeCanvas(path, img)
}

type legendEntry struct {
	name  string
	thumb plot.Thumbnailer
}

// gapPanel is GapPlot's panel of setting s, and its legend entries.
func gapPanel(rep *Report, s int) (*plot.Plot, []legendEntry, error) {
	set := rep.Settings[s]
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s at %s (τ₀ = %g): final accuracy minus %s's at the same length, seed by seed", rep.Model, set.Label, set.Tau0, rep.Baseline)
	p.X.Label.Text = "asynchronous steps of the run (a synchronous variant: its steps)"
	p.Y.Label.Text = "gap, points (mean ± std; marks: seeds)"
	var entries []legendEntry
	lo, hi := math.Inf(1), math.Inf(-1)
	for m, name := range rep.Methods {
		if name == rep.Baseline {
			continue
		}
		var pts, seeds plotter.XYs
		var errs plotter.YErrors
		for e := range rep.Epochs {
			c := rep.cell(s, e, m)
			if c.Gap == nil {
				continue
			}
			x := float64(c.AsyncSteps)
			if x == 0 {
				x = float64(c.Steps)
			}
			x *= 1 + 0.006*(float64(m)-float64(len(rep.Methods))/2) // side by side
			lo, hi = min(lo, x), max(hi, x)
			pts = append(pts, plotter.XY{X: x, Y: c.Gap.Mean})
			errs = append(errs, struct{ Low, High float64 }{c.Gap.Std, c.Gap.Std})
			for _, g := range c.Gap.Points {
				seeds = append(seeds, plotter.XY{X: x, Y: g})
			}
		}
		if len(pts) == 0 {
			continue
		}
		line, points, bars, err := lineWithBars(pts, errs)
		if err != nil {
			return nil, nil, err
		}
		marks, err := plotter.NewScatter(seeds)
		if err != nil {
			return nil, nil, err
		}
		line.Color, points.Color, bars.Color, marks.Color = plotutil.Color(m), plotutil.Color(m), plotutil.Color(m), plotutil.Color(m)
		line.Width = vg.Points(1.5)
		line.Dashes = plotutil.Dashes(m / 7) // the colours repeat after 7
		points.Shape = plotutil.Shape(m)
		marks.Radius = vg.Points(1.5)
		p.Add(line, points, bars, marks)
		entries = append(entries, legendEntry{name, thumbnails{line, points}})
	}
	if math.IsInf(lo, 1) {
		return p, entries, nil
	}
	for _, y := range []float64{0, -rep.Tolerance} {
		ref, err := plotter.NewLine(plotter.XYs{{X: lo / 1.1, Y: y}, {X: hi * 1.1, Y: y}})
		if err != nil {
			return nil, nil, err
		}
		ref.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		ref.Color = plotutil.Color(len(rep.Methods) + 7)
		p.Add(ref)
	}
	if hi >= 4*lo {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = ticks125{}
	}
	p.X.Min, p.X.Max = lo/1.1, hi*1.1
	return p, entries, nil
}

// ticks125 are ticks at 1, 2 and 5 times the powers of ten, for a
// logarithmic axis spanning less than a few decades.
type ticks125 struct{}

// Ticks implements plot.Ticker.
func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			if v := m * math.Pow(10, e); v >= lo && v <= hi {
				out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
			}
		}
	}
	return out
}
