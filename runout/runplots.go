package runout

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// PlotFiles are the figures WritePlots writes.
var PlotFiles = []string{"loss.png", "gantt.png", "utilization.png", "memory.png"}

// WritePlots draws the runs' results, into dir, loss.png (every run's loss curve, each
// warm-up's end marked) and gantt.png, utilization.png and memory.png with
// one panel per run, titled with the run's label, and a legend beside the
// panels (the figures pipemare train and compare write). The results need
// their Events and Report.
func WritePlots(dir string, runs []Compared) error {
	if err := lossPlot(filepath.Join(dir, "loss.png"), runs); err != nil {
		return err
	}
	figures := []struct {
		file   string
		height func(*train.Result) vg.Length
		legend func([]Compared) plot.Legend
		panel  func(*plot.Plot, Compared) error
	}{
		{"gantt.png", func(r *train.Result) vg.Length { return vg.Length(1.2+0.25*float64(r.Stages)) * vg.Inch }, ganttLegend, ganttPanel},
		{"utilization.png", func(*train.Result) vg.Length { return 2.6 * vg.Inch }, utilizationLegend, utilizationPanel},
		{"memory.png", func(*train.Result) vg.Length { return 3 * vg.Inch }, memoryLegend, memoryPanel},
	}
	for _, f := range figures {
		if err := saveFigure(filepath.Join(dir, f.file), runs, f.height, f.legend(runs), f.panel); err != nil {
			return errors.Wrap(err, f.file)
		}
	}
	return nil
}

const (
	figureWidth = 11 * vg.Inch
	legendWidth = 2.3 * vg.Inch
)

// saveFigure draws one panel per run, stacked, with the legend in a column
// on the right, and writes the figure as a PNG.
func saveFigure(path string, runs []Compared, height func(*train.Result) vg.Length, legend plot.Legend, panel func(*plot.Plot, Compared) error) error {
	total := vg.Length(0)
	for _, r := range runs {
		total += height(r.Result)
	}
	img := vgimg.New(figureWidth, total)
	dc := draw.New(img)
	top := vg.Length(0)
	for _, r := range runs {
		h := height(r.Result)
		p := plot.New()
		if err := panel(p, r); err != nil {
			return err
		}
		p.Draw(draw.Crop(dc, 0, -legendWidth, total-top-h, -top-vg.Points(4)))
		top += h
	}
	legend.Top, legend.Left = true, true
	legend.Padding = vg.Points(3)
	legend.Draw(draw.Crop(dc, figureWidth-legendWidth+8, 0, 0, -12))
	return writePNG(path, img)
}

func writePNG(path string, img *vgimg.Canvas) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, checkpoint.FileMode)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// lossPlot draws every run's minibatch loss, a running mean over 10 steps,
// and a dashed line where each warm-up hands over to the asynchronous
// schedule.
func lossPlot(path string, runs []Compared) error {
	p := plot.New()
	p.Title.Text = "training loss"
	p.X.Label.Text = "step (minibatch)"
	p.Y.Label.Text = "minibatch loss, mean of 10 steps"
	top := 0.0
	for i, r := range runs {
		var pts plotter.XYs
		step := 0
		for _, e := range r.Result.Epochs {
			for _, l := range e.Losses {
				pts = append(pts, plotter.XY{X: float64(step), Y: l})
				step++
			}
		}
		line, err := plotter.NewLine(smooth(pts, 10))
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(i)
		line.Dashes = plotutil.Dashes(i / 7)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(r.Label, line)
		for _, pt := range line.XYs {
			top = max(top, pt.Y)
		}
	}
	marked := map[int]bool{}
	for i, r := range runs {
		w := r.Result.Config.Warmup
		if w <= 0 || marked[w] {
			continue
		}
		marked[w] = true
		mark, err := plotter.NewLine(plotter.XYs{{X: float64(w), Y: 0}, {X: float64(w), Y: top}})
		if err != nil {
			return err
		}
		mark.Color = plotutil.Color(i)
		mark.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(mark)
		// At the bottom, under the curves (a loss stays well above 0
		// this early), away from the legend at the top right.
		y := top * (0.03 + 0.06*float64(len(marked)-1))
		label, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: float64(w), Y: y}}, Labels: []string{fmt.Sprintf(" %s: the warm-up ends, asynchronous from step %d", r.Label, w)}})
		if err != nil {
			return err
		}
		p.Add(label)
	}
	p.Y.Min = 0
	p.Legend.Top = true
	return p.Save(10*vg.Inch, 4.5*vg.Inch, path)
}

// smooth is a running mean over w points.
func smooth(pts plotter.XYs, w int) plotter.XYs {
	out := make(plotter.XYs, len(pts))
	sum := 0.0
	for i := range pts {
		sum += pts[i].Y
		if i >= w {
			sum -= pts[i-w].Y
		}
		out[i] = plotter.XY{X: pts[i].X, Y: sum / float64(min(i+1, w))}
	}
	return out
}

var opColors = []struct {
	op    schedule.Op
	name  string
	color color.Color
}{
	{schedule.OpForward, "forward", color.RGBA{R: 60, G: 110, B: 200, A: 255}},
	{schedule.OpBackward, "backward", color.RGBA{R: 230, G: 140, B: 40, A: 255}},
	{schedule.OpUpdate, "update", color.Black},
	{schedule.OpFlush, "flush (waiting)", color.RGBA{R: 170, G: 170, B: 170, A: 255}},
}

// ganttLegend names the colours of the actions the Gantt panels show.
func ganttLegend(runs []Compared) plot.Legend {
	has := map[schedule.Op]bool{}
	for _, r := range runs {
		from, to := steadyWindow(r.Result)
		for _, evs := range r.Result.Events {
			for _, e := range evs {
				if e.End >= from && e.Start <= to {
					has[e.Action.Op] = true
				}
			}
		}
	}
	l := plot.NewLegend()
	for _, c := range opColors {
		if has[c.op] {
			l.Add(c.name, rects{color: c.color})
		}
	}
	return l
}

// steadyWindow is the Gantt's window: the span of three minibatches
// (three times the median time between two updates of stage 0 in the
// steady state) where the stages were busiest, among windows inside the
// run's steady state (asyncvm.SteadyState) that start at a forward of
// stage 0: the full pipeline, neither a warm-up, nor its fill or final
// drain, nor a pause for evaluation.
func steadyWindow(r *train.Result) (from, to time.Duration) {
	if len(r.Events) == 0 || len(r.Events[0]) == 0 {
		return 0, 0
	}
	lo, hi, ok := asyncvm.SteadyState(r.Events, r.Report.Schedule)
	if !ok { // no steady state: the whole run
		lo, hi = 0, r.Events[0][len(r.Events[0])-1].End
	}
	var updates []time.Duration
	for _, e := range r.Events[0] {
		if e.Action.Op == schedule.OpUpdate && e.End >= lo && e.End <= hi {
			updates = append(updates, e.End)
		}
	}
	var gaps []time.Duration
	for k := 1; k < len(updates); k++ {
		gaps = append(gaps, updates[k]-updates[k-1])
	}
	width := hi - lo
	if len(gaps) > 0 {
		sort.Slice(gaps, func(a, b int) bool { return gaps[a] < gaps[b] })
		width = min(width, 3*gaps[len(gaps)/2])
	}
	busy := make([]stageBusy, len(r.Events))
	for i, evs := range r.Events {
		busy[i] = newStageBusy(evs)
	}
	best := -1.0
	for _, e := range r.Events[0] {
		if e.Action.Op != schedule.OpForward || e.Start < lo || e.Start+width > hi {
			continue
		}
		total := 0.0
		for _, b := range busy {
			total += b.within(e.Start, e.Start+width)
		}
		if total > best {
			best, from = total, e.Start
		}
	}
	if best < 0 {
		from = max(lo, hi-width)
	}
	return from, from + width
}

// stageBusy answers how long a stage was busy within a time window: its
// events in order and the running sum of their durations.
type stageBusy struct {
	evs []asyncvm.Event
	sum []float64 // sum[k] is the duration of evs[:k]
}

func newStageBusy(evs []asyncvm.Event) stageBusy {
	b := stageBusy{evs: evs, sum: make([]float64, len(evs)+1)}
	for k, e := range evs {
		b.sum[k+1] = b.sum[k] + float64(e.End-e.Start)
	}
	return b
}

// within is the busy time in [from, to), the events at either edge clipped.
func (b stageBusy) within(from, to time.Duration) float64 {
	lo := sort.Search(len(b.evs), func(k int) bool { return b.evs[k].End > from })
	hi := sort.Search(len(b.evs), func(k int) bool { return b.evs[k].Start >= to })
	if lo >= hi {
		return 0
	}
	total := b.sum[hi] - b.sum[lo]
	if e := b.evs[lo]; e.Start < from {
		total -= float64(from - e.Start)
	}
	if e := b.evs[hi-1]; e.End > to {
		total -= float64(e.End - to)
	}
	return total
}

// ganttPanel draws each stage's actions over the steady-state window,
// stage 0 at the top.
func ganttPanel(p *plot.Plot, r Compared) error {
	res := r.Result
	P := len(res.Events)
	from, to := steadyWindow(res)
	byOp := make([]rects, len(opColors))
	for k, c := range opColors {
		byOp[k].color = c.color
	}
	for i, evs := range res.Events {
		y := float64(P - 1 - i)
		for _, e := range evs {
			if e.End < from || e.Start > to {
				continue
			}
			for k, c := range opColors {
				if c.op == e.Action.Op {
					s, f := max(e.Start, from), min(e.End, to)
					byOp[k].boxes = append(byOp[k].boxes, rect{x0: s.Seconds(), x1: f.Seconds(), y0: y - 0.4, y1: y + 0.4})
				}
			}
		}
	}
	for _, b := range byOp {
		p.Add(b)
	}
	p.Title.Text = fmt.Sprintf("%s: %d stages, the busiest three minibatches (%.2f–%.2f s of a %.1f s run)", r.Label, P, from.Seconds(), to.Seconds(), res.Report.Wall.Seconds())
	p.X.Label.Text = "seconds since the pipeline started"
	p.Y.Label.Text = "stage"
	p.X.Min, p.X.Max = from.Seconds(), to.Seconds()
	p.X.Tick.Marker = secondTicks{}
	p.Y.Min, p.Y.Max = -0.5, float64(P)-0.5
	p.Y.Tick.Marker = stageTicks{p: P, reversed: true}
	return nil
}

func utilizationLegend([]Compared) plot.Legend {
	l := plot.NewLegend()
	l.Add("measured (steady state)", rects{color: plotutil.Color(0)})
	l.Add("virtual devices (replay)", rects{color: plotutil.Color(1)})
	return l
}

// utilizationPanel draws each stage's measured utilization beside its
// utilization on virtual devices.
func utilizationPanel(p *plot.Plot, r Compared) error {
	measured, virtual := rects{color: plotutil.Color(0)}, rects{color: plotutil.Color(1)}
	for i, s := range r.Result.Report.PerStage {
		x := float64(i)
		measured.boxes = append(measured.boxes, rect{x0: x - 0.38, x1: x, y0: 0, y1: s.Utilization})
		if i < len(r.Result.Virtual.PerStage) {
			virtual.boxes = append(virtual.boxes, rect{x0: x, x1: x + 0.38, y0: 0, y1: r.Result.Virtual.PerStage[i]})
		}
	}
	p.Add(measured, virtual)
	p.Title.Text = fmt.Sprintf("%s: utilization per stage (mean %.3f measured, %.3f on virtual devices)", r.Label, r.Result.Report.Utilization, r.Result.Virtual.Utilization)
	p.X.Label.Text = "stage"
	p.Y.Label.Text = "busy fraction"
	p.X.Min, p.X.Max = -0.5, float64(len(r.Result.Report.PerStage))-0.5
	p.Y.Min, p.Y.Max = 0, 1
	p.X.Tick.Marker = stageTicks{p: len(r.Result.Report.PerStage)}
	return nil
}

var memoryCategories = []struct {
	name string
	get  func(asyncvm.Memory) int64
}{
	{"parameters", func(m asyncvm.Memory) int64 { return m.Parameters }},
	{"optimizer state", func(m asyncvm.Memory) int64 { return m.OptimizerState }},
	{"gradients", func(m asyncvm.Memory) int64 { return m.Gradients }},
	{"stashed weights", func(m asyncvm.Memory) int64 { return m.StashedWeights }},
	{"correction (T2)", func(m asyncvm.Memory) int64 { return m.Correction }},
	{"activations", func(m asyncvm.Memory) int64 { return m.StashedActivation }},
}

func memoryLegend([]Compared) plot.Legend {
	l := plot.NewLegend()
	for k, c := range memoryCategories {
		l.Add(c.name, rects{color: plotutil.Color(k)})
	}
	return l
}

// memoryPanel draws each stage's memory by category as side-by-side bars
// on a log scale, so that a category a hundred times smaller than the
// stashed activations still shows; a category a run does not use has no
// bar and is named in the title.
func memoryPanel(p *plot.Plot, r Compared) error {
	stages := r.Result.Report.PerStage
	width := 0.8 / float64(len(memoryCategories))
	floor, top := math.Inf(1), 0.0
	var none []string
	bars := make([]*rects, len(memoryCategories))
	for k, c := range memoryCategories {
		b := &rects{color: plotutil.Color(k)}
		bars[k] = b
		for i, s := range stages {
			if kib := float64(c.get(s.Memory)) / 1024; kib > 0 {
				x := float64(i) - 0.4 + float64(k)*width
				b.boxes = append(b.boxes, rect{x0: x, x1: x + width, y1: kib})
				floor, top = min(floor, kib), max(top, kib)
			}
		}
		if len(b.boxes) == 0 {
			none = append(none, c.name)
		}
		p.Add(b)
	}
	if math.IsInf(floor, 1) {
		floor, top = 1, 10
	}
	floor = math.Pow(10, math.Floor(math.Log10(floor)))
	for _, b := range bars { // bars start at the axis floor
		for i := range b.boxes {
			b.boxes[i].y0 = floor
		}
	}
	total := r.Result.Report.Memory.Total()
	p.Title.Text = fmt.Sprintf("%s: memory per stage by category, %.0f KiB in all", r.Label, float64(total)/1024)
	if len(none) > 0 {
		p.Title.Text += fmt.Sprintf("; no %s", joinOr(none))
	}
	p.X.Label.Text = "stage"
	p.Y.Label.Text = "KiB (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = floor, top*1.5
	p.X.Min, p.X.Max = -0.5, float64(len(stages))-0.5
	p.X.Tick.Marker = stageTicks{p: len(stages)}
	return nil
}

func joinOr(names []string) string {
	s := ""
	for i, n := range names {
		switch {
		case i == 0:
		case i == len(names)-1:
			s += " or "
		default:
			s += ", "
		}
		s += n
	}
	return s
}

// stageTicks puts a labelled tick on every stage (every k-th label when
// there are many), at y = P−1−i when reversed so stage 0 is on top.
type stageTicks struct {
	p        int
	reversed bool
}

func (t stageTicks) Ticks(_, _ float64) []plot.Tick {
	every := max(1, (t.p+19)/20)
	var ticks []plot.Tick
	for i := 0; i < t.p; i++ {
		v := float64(i)
		if t.reversed {
			v = float64(t.p - 1 - i)
		}
		label := ""
		if i%every == 0 {
			label = strconv.Itoa(i)
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
	}
	return ticks
}

// secondTicks are gonum's default ticks labelled with as many decimals as
// their spacing needs (the default labels of a 0.3 s window can repeat
// "24, 24, 25").
type secondTicks struct{}

func (secondTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	var labelled []float64
	for _, t := range ticks {
		if t.Label != "" {
			labelled = append(labelled, t.Value)
		}
	}
	step := math.Inf(1)
	for i := 1; i < len(labelled); i++ {
		step = math.Min(step, labelled[i]-labelled[i-1])
	}
	exactAt := func(decimals int) bool {
		scale := math.Pow(10, float64(decimals))
		for _, v := range labelled {
			if math.Abs(math.Round(v*scale)/scale-v) >= step/1000 {
				return false
			}
		}
		return true
	}
	decimals := 0 // the fewest that write every labelled value exactly
	for decimals < 9 && !exactAt(decimals) {
		decimals++
	}
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', decimals, 64)
		}
	}
	return ticks
}

// rect is a box in data coordinates.
type rect struct{ x0, x1, y0, y1 float64 }

// rects draws filled boxes in one colour: Gantt bars, and bar charts whose
// bars start where the axis does (a log axis has no 0).
type rects struct {
	boxes []rect
	color color.Color
}

// Plot implements plot.Plotter.
func (r rects) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	for _, b := range r.boxes {
		pts := []vg.Point{{X: trX(b.x0), Y: trY(b.y0)}, {X: trX(b.x1), Y: trY(b.y0)}, {X: trX(b.x1), Y: trY(b.y1)}, {X: trX(b.x0), Y: trY(b.y1)}}
		c.FillPolygon(r.color, c.ClipPolygonXY(pts))
	}
}

// DataRange implements plot.DataRanger.
func (r rects) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, ymin, xmax, ymax = math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	for _, b := range r.boxes {
		xmin, xmax = min(xmin, b.x0), max(xmax, b.x1)
		ymin, ymax = min(ymin, b.y0), max(ymax, b.y1)
	}
	if len(r.boxes) == 0 {
		return 0, 1, 1, 1
	}
	return
}

// Thumbnail implements plot.Thumbnailer, for legends.
func (r rects) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}}
	c.FillPolygon(r.color, pts)
}
