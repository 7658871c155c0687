package main

import (
	"fmt"
	"image/color"
	"path/filepath"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// writePlots draws loss.png (every run), and gantt.png, utilization.png
// and memory.png of the first run.
func writePlots(dir string, runs []*zoo.Result) error {
	if err := lossPlot(filepath.Join(dir, "loss.png"), runs); err != nil {
		return err
	}
	r := runs[0]
	if len(r.Events) > 0 {
		if err := ganttPlot(filepath.Join(dir, "gantt.png"), r); err != nil {
			return err
		}
	}
	if err := utilizationPlot(filepath.Join(dir, "utilization.png"), r); err != nil {
		return err
	}
	return memoryPlot(filepath.Join(dir, "memory.png"), r)
}

func lossPlot(path string, runs []*zoo.Result) error {
	p := plot.New()
	p.Title.Text = "training loss"
	p.X.Label.Text = "step"
	p.Y.Label.Text = "minibatch loss"
	var lines []interface{}
	for _, r := range runs {
		var pts plotter.XYs
		step := 0
		for _, e := range r.Epochs {
			for _, l := range e.Losses {
				pts = append(pts, plotter.XY{X: float64(step), Y: l})
				step++
			}
		}
		lines = append(lines, label(r), smooth(pts, 10))
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return err
	}
	p.Legend.Top = true
	return p.Save(8*vg.Inch, 4*vg.Inch, path)
}

func label(r *zoo.Result) string {
	l := r.Report.Schedule
	if r.Config.T1 > 0 || r.Config.T2 > 0 {
		l += " +T1/T2"
	}
	return l
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

// ganttPlot draws the stages over time: forwards blue, backwards orange,
// updates black, for the last half second of the first run.
func ganttPlot(path string, r *zoo.Result) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s, %d stages: actions over time (last 0.5 s)", r.Report.Schedule, len(r.Events))
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "stage"
	end := 0.0
	for _, evs := range r.Events {
		if len(evs) > 0 {
			end = max(end, evs[len(evs)-1].End.Seconds())
		}
	}
	from := end - 0.5
	colors := map[schedule.Op]color.Color{
		schedule.OpForward:  color.RGBA{R: 60, G: 110, B: 200, A: 255},
		schedule.OpBackward: color.RGBA{R: 230, G: 140, B: 40, A: 255},
		schedule.OpUpdate:   color.Black,
	}
	for i, evs := range r.Events {
		for _, e := range evs {
			if e.End.Seconds() < from {
				continue
			}
			c, ok := colors[e.Action.Op]
			if !ok {
				continue
			}
			s, f := max(e.Start.Seconds(), from)-from, e.End.Seconds()-from
			line, err := plotter.NewLine(plotter.XYs{{X: s, Y: float64(i)}, {X: f, Y: float64(i)}})
			if err != nil {
				return err
			}
			line.Color = c
			line.Width = vg.Points(8)
			p.Add(line)
		}
	}
	p.Y.Min, p.Y.Max = -1, float64(len(r.Events))
	return p.Save(10*vg.Inch, vg.Length(1+0.3*float64(len(r.Events)))*vg.Inch, path)
}

func utilizationPlot(path string, r *zoo.Result) error {
	p := plot.New()
	p.Title.Text = "utilization per stage (measured)"
	p.Y.Label.Text = "busy / steady-state window"
	var v plotter.Values
	var names []string
	for _, s := range r.Report.PerStage {
		v = append(v, s.Utilization)
		names = append(names, fmt.Sprint(s.Stage))
	}
	bars, err := plotter.NewBarChart(v, vg.Points(12))
	if err != nil {
		return err
	}
	p.Add(bars)
	p.NominalX(names...)
	p.Y.Max = 1
	return p.Save(8*vg.Inch, 3*vg.Inch, path)
}

func memoryPlot(path string, r *zoo.Result) error {
	p := plot.New()
	p.Title.Text = "memory per stage by category (KiB)"
	cats := []struct {
		name string
		get  func(asyncvm.Memory) int64
	}{
		{"parameters", func(m asyncvm.Memory) int64 { return m.Parameters }},
		{"optimizer", func(m asyncvm.Memory) int64 { return m.OptimizerState }},
		{"gradients", func(m asyncvm.Memory) int64 { return m.Gradients }},
		{"stashed weights", func(m asyncvm.Memory) int64 { return m.StashedWeights }},
		{"correction", func(m asyncvm.Memory) int64 { return m.Correction }},
		{"activations", func(m asyncvm.Memory) int64 { return m.StashedActivation }},
	}
	var names []string
	for _, s := range r.Report.PerStage {
		names = append(names, fmt.Sprint(s.Stage))
	}
	var prev *plotter.BarChart
	for ci, c := range cats {
		var v plotter.Values
		for _, s := range r.Report.PerStage {
			v = append(v, float64(c.get(s.Memory))/1024)
		}
		bars, err := plotter.NewBarChart(v, vg.Points(12))
		if err != nil {
			return err
		}
		bars.Color = plotutil.Color(ci)
		bars.LineStyle.Width = 0
		if prev != nil {
			bars.StackOn(prev)
		}
		prev = bars
		p.Add(bars)
		p.Legend.Add(c.name, bars)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.NominalX(names...)
	_ = draw.Tiles{}
	return p.Save(8*vg.Inch, 4*vg.Inch, path)
}
