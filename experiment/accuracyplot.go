package experiment

import (
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/pipemare/pipemare/checkpoint"
)

// AccuracyPlot draws a sweep's longest length with results (the last
// length when none has) as an SVG with two panels and a legend on the
// right. Left: the final accuracy against τ_0, a line per method through
// the mean over seeds with error bars of one standard deviation (a dashed
// line for injected fixed delays, a dotted one for exponential ones); the
// methods' points at one τ_0 are spread a little sideways so that their
// bars do not hide each other. Right: the test accuracy after each epoch
// at the largest τ_0 of the pipeline's own delays (else of all settings),
// mean ± std over seeds, a line per method, with the target as a grey
// line: how soon each method gets there.
func AccuracyPlot(path string, rep *Report) error {
	at := len(rep.Epochs) - 1
	for e := len(rep.Epochs) - 1; e >= 0; e-- {
		if slices.ContainsFunc(rep.Cells, func(c Cell) bool { return c.Epochs == rep.Epochs[e] && len(c.Accuracies) > 0 }) {
			at = e
			break
		}
	}
	left := plot.New()
	left.Title.Text = "final test accuracy, mean ± std over seeds"
	left.X.Label.Text = "τ₀, the first stage's delay in updates"
	left.Y.Label.Text = "test accuracy"
	var ticks []plot.Tick
	taus := map[float64]bool{}
	for _, s := range rep.Settings {
		if !taus[s.Tau0] {
			taus[s.Tau0] = true
			ticks = append(ticks, plot.Tick{Value: s.Tau0, Label: strconv.FormatFloat(s.Tau0, 'g', -1, 64)})
		}
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Value < ticks[j].Value })
	left.X.Tick.Marker = plot.ConstantTicks(ticks)
	gap := 1.0 // the smallest distance between two τ_0, for the spread
	for i := 1; i < len(ticks); i++ {
		gap = math.Min(gap, ticks[i].Value-ticks[i-1].Value)
	}
	spread := func(i int) float64 { return 0.4 * gap * (float64(i)/math.Max(1, float64(len(rep.Methods)-1)) - 0.5) }

	var legend []plot.Thumbnailer
	var names []string
	style := func(i, k int, line *plotter.Line, points *plotter.Scatter) {
		line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
		line.Width = vg.Points(1.5)
		line.Dashes = [][]vg.Length{plotutil.Dashes(i / 7), {vg.Points(6), vg.Points(3)}, {vg.Points(1.5), vg.Points(2.5)}}[k]
		points.Shape = plotutil.Shape(i)
	}
	kinds := []struct{ prefix, name string }{{"", ""}, {"fixed", ", fixed delays"}, {"exp", ", exponential delays"}}
	for i, m := range rep.Methods {
		for k, kind := range kinds {
			var pts plotter.XYs
			var errs plotter.YErrors
			for j, s := range rep.Settings {
				c := rep.cell(j, at, i)
				if len(c.Accuracies) == 0 || !strings.HasPrefix(s.Injected, kind.prefix) || (kind.prefix == "" && s.Injected != "") {
					continue
				}
				pts = append(pts, plotter.XY{X: s.Tau0 + spread(i), Y: c.Mean})
				errs = append(errs, struct{ Low, High float64 }{c.Std, c.Std})
			}
			if len(pts) == 0 {
				continue
			}
			sort.Sort(byX{pts, errs})
			line, points, bars, err := lineWithBars(pts, errs)
			if err != nil {
				return err
			}
			style(i, k, line, points)
			bars.Color = plotutil.Color(i)
			left.Add(line, points, bars)
			legend = append(legend, thumbnails{line, points})
			names = append(names, m+kind.name)
		}
	}
	if len(ticks) > 0 {
		lo, hi := ticks[0].Value, ticks[len(ticks)-1].Value
		left.X.Min, left.X.Max = lo-0.05*(hi-lo)-0.4*gap, hi+0.05*(hi-lo)+0.4*gap // the points off the axes
	}

	right, err := epochPanel(rep, at, style)
	if err != nil {
		return err
	}

	l := newSideLegend()
	for i, t := range legend {
		l.Add(names[i], t)
	}
	const panelW, height = 4.3 * vg.Inch, 5 * vg.Inch
	legendW := l.Width()
	width := 2*panelW + legendW
	img := newCanvas(path, width, height+vg.Points(24))
	dc := draw.New(img)
	seeds := make([]string, len(rep.Seeds))
	for i, s := range rep.Seeds {
		seeds[i] = strconv.FormatInt(s, 10)
	}
	title := fmt.Sprintf("%s, %d stages, %s, seeds %s", rep.Model, rep.Stages, epochs(rep.Epochs[at]), strings.Join(seeds, ", "))
	dc.FillText(draw.TextStyle{Color: left.Title.TextStyle.Color, Font: left.Title.TextStyle.Font, Handler: left.Title.TextStyle.Handler, XAlign: draw.XCenter, YAlign: draw.YTop},
		vg.Point{X: panelW, Y: height + vg.Points(20)}, title)
	left.Draw(draw.Crop(dc, 0, -(width - panelW), 0, -vg.Points(24)))
	right.Draw(draw.Crop(dc, panelW, -legendW, 0, -vg.Points(24)))
	l.DrawRight(dc, vg.Points(36))
	return writeCanvas(path, img)
}

// newCanvas is a canvas of w × h for the file path: a PNG for a name
// ending in .png, else an SVG.
func newCanvas(path string, w, h vg.Length) vg.CanvasWriterTo {
	if strings.HasSuffix(path, ".png") {
		return vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	}
	return vgsvg.New(w, h)
}

// writeCanvas writes a canvas to path.
func writeCanvas(path string, img vg.CanvasWriterTo) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, checkpoint.FileMode)
	if err != nil {
		return err
	}
	if _, err := img.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// epochPanel is AccuracyPlot's right panel: accuracy after each epoch of
// the runs of length index e at the largest τ_0 (pipeline delays first), a
// line per method.
func epochPanel(rep *Report, e int, style func(i, k int, line *plotter.Line, points *plotter.Scatter)) (*plot.Plot, error) {
	p := plot.New()
	p.X.Label.Text = "epoch"
	p.Y.Label.Text = "test accuracy"
	at := -1
	later := func(a, b Setting) bool { // a is chosen over b
		if (a.Injected == "") != (b.Injected == "") {
			return a.Injected == ""
		}
		return a.Tau0 > b.Tau0
	}
	for j, s := range rep.Settings {
		if at < 0 || later(s, rep.Settings[at]) {
			at = j
		}
	}
	if at < 0 {
		return p, nil
	}
	s := rep.Settings[at]
	p.Title.Text = fmt.Sprintf("test accuracy after each epoch at %s (τ₀ = %g)", s.Label, s.Tau0)
	epochs := 0
	for i := range rep.Methods {
		c := rep.cell(at, e, i)
		if len(c.EpochMean) == 0 {
			continue
		}
		var pts plotter.XYs
		var errs plotter.YErrors
		for k, m := range c.EpochMean {
			pts = append(pts, plotter.XY{X: float64(k+1) + 0.3*(float64(i)/math.Max(1, float64(len(rep.Methods)-1))-0.5), Y: m})
			errs = append(errs, struct{ Low, High float64 }{c.EpochStd[k], c.EpochStd[k]})
		}
		epochs = max(epochs, len(pts))
		line, points, bars, err := lineWithBars(pts, errs)
		if err != nil {
			return nil, err
		}
		k := 0
		if strings.HasPrefix(s.Injected, "fixed") {
			k = 1
		} else if s.Injected != "" {
			k = 2
		}
		style(i, k, line, points)
		bars.Color = plotutil.Color(i)
		p.Add(line, points, bars)
	}
	if epochs > 0 {
		target := plotter.NewFunction(func(float64) float64 { return rep.TargetAccuracy })
		target.Color = plotutil.Color(len(rep.Methods) + 7)
		target.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(target)
		var ticks []plot.Tick
		for e := 1; e <= epochs; e++ {
			ticks = append(ticks, plot.Tick{Value: float64(e), Label: strconv.Itoa(e)})
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.X.Min, p.X.Max = 0.5, float64(epochs)+0.5
	}
	return p, nil
}

// lineWithBars is a line with points through pts and error bars errs.
func lineWithBars(pts plotter.XYs, errs plotter.YErrors) (*plotter.Line, *plotter.Scatter, *plotter.YErrorBars, error) {
	line, points, err := plotter.NewLinePoints(pts)
	if err != nil {
		return nil, nil, nil, err
	}
	bars, err := plotter.NewYErrorBars(struct {
		plotter.XYs
		plotter.YErrors
	}{pts, errs})
	return line, points, bars, err
}

// thumbnails draws several thumbnails on top of each other (a legend
// entry for a line with points).
type thumbnails []plot.Thumbnailer

func (t thumbnails) Thumbnail(c *draw.Canvas) {
	for _, x := range t {
		x.Thumbnail(c)
	}
}

// byX sorts points and their error bars together by x.
type byX struct {
	pts  plotter.XYs
	errs plotter.YErrors
}

func (b byX) Len() int           { return len(b.pts) }
func (b byX) Less(i, j int) bool { return b.pts[i].X < b.pts[j].X }
func (b byX) Swap(i, j int) {
	b.pts[i], b.pts[j] = b.pts[j], b.pts[i]
	b.errs[i], b.errs[j] = b.errs[j], b.errs[i]
}
