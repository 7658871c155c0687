package experiment

import (
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// sideLegend is the legend a sweep figure draws right of its panels, wide
// enough for its longest name: a variant's name with its parameters
// ("spike(warmup=0.1,t2=0.5,momentum=0.5)") is longer than any fixed margin
// that also suits "naive".
type sideLegend struct {
	plot.Legend
	names []string
}

func newSideLegend() *sideLegend {
	l := &sideLegend{Legend: plot.NewLegend()}
	l.Top, l.Left = true, true
	l.Padding = vg.Points(3)
	return l
}

// Add adds an entry, as plot.Legend.Add.
func (l *sideLegend) Add(name string, t ...plot.Thumbnailer) {
	l.Legend.Add(name, t...)
	l.names = append(l.names, name)
}

// Width is the room the legend needs: its thumbnails, the longest name
// and a margin either side. The names are measured in the plot's font
// (Liberation Serif) and given a quarter more: an SVG viewer without that
// font draws them in its own serif, DejaVu Serif's names being a fifth
// wider.
func (l *sideLegend) Width() vg.Length {
	var w vg.Length
	for _, n := range l.names {
		w = max(w, l.TextStyle.Width(n))
	}
	return l.ThumbnailWidth + 2*l.Padding + 1.25*w + 2*sideLegendMargin
}

// DrawRight draws the legend in the rightmost Width of c, top down from
// top below c's top edge.
func (l *sideLegend) DrawRight(c draw.Canvas, top vg.Length) {
	l.Draw(draw.Crop(c, c.Max.X-c.Min.X-l.Width()+sideLegendMargin, 0, 0, -top))
}

// sideLegendMargin separates the legend from the panels and the figure's
// edge.
const sideLegendMargin = 8
