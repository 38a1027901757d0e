package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/webhookd/webhookd/bench/loadgen"
)

var (
	ackColor      = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	deliveryColor = color.RGBA{R: 0xd6, G: 0x60, B: 0x1e, A: 0xff}
	markColor     = color.Gray{Y: 0x60}
)

// plotFormat returns the picture format for path's extension ("png" or
// "svg"), or an error naming the flag.
func plotFormat(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".png", ".svg":
		return ext[1:], nil
	default:
		return "", fmt.Errorf("--plot: %q must end in .png or .svg", path)
	}
}

// writePlot draws rep to path: on top acks/s and deliveries/s over the
// run, with the moment sending stopped; below the ack-latency histogram
// on a log axis, with p50 and p99.
func writePlot(path string, rep *loadgen.Report) error {
	format, err := plotFormat(path)
	if err != nil {
		return err
	}
	rates, err := ratesPlot(rep)
	if err != nil {
		return err
	}
	latency, err := latencyPlot(rep)
	if err != nil {
		return err
	}
	c, err := draw.NewFormattedCanvas(8*vg.Inch, 7*vg.Inch, format)
	if err != nil {
		return err
	}
	plots := [][]*plot.Plot{{rates}, {latency}}
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(12), PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(10)}
	for i, dc := range plot.Align(plots, tiles, draw.New(c)) {
		plots[i][0].Draw(dc[0])
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("error writing the plot: %w", err)
	}
	if _, err := c.WriteTo(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("error writing the plot: %w", err)
	}
	return f.Close()
}

// ratesPlot draws acks/s and deliveries/s between consecutive samples of
// the timeline, each at the middle of its interval.
func ratesPlot(rep *loadgen.Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = rep.Label
	if p.Title.Text == "" {
		p.Title.Text = "webhookd-bench: " + rep.Mode
	}
	p.X.Label.Text = "seconds from the first send"
	p.Y.Label.Text = "per second"
	p.Add(plotter.NewGrid())
	var acks, delivered plotter.XYs
	samples := rep.Timeline.Samples
	for i := 1; i < len(samples); i++ {
		prev, cur := samples[i-1], samples[i]
		dt := cur.Seconds - prev.Seconds
		if dt <= 0 {
			continue
		}
		mid := (prev.Seconds + cur.Seconds) / 2
		acks = append(acks, plotter.XY{X: mid, Y: float64(cur.Acks-prev.Acks) / dt})
		if prev.Delivered != nil && cur.Delivered != nil {
			delivered = append(delivered, plotter.XY{X: mid, Y: float64(*cur.Delivered-*prev.Delivered) / dt})
		}
	}
	top := 1.0
	for _, series := range []struct {
		name string
		xys  plotter.XYs
		c    color.Color
	}{{"acks/s", acks, ackColor}, {"deliveries/s", delivered, deliveryColor}} {
		if len(series.xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(series.xys)
		if err != nil {
			return nil, err
		}
		l.Color = series.c
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(series.name, l)
		for _, xy := range series.xys {
			top = max(top, xy.Y)
		}
	}
	// The headroom keeps the legend above the lines.
	p.X.Min = 0
	p.Y.Min, p.Y.Max = 0, top*1.35
	p.Y.Tick.Marker = wholeTicks{}
	if stopped := rep.Timeline.SendingStoppedSeconds; stopped > 0 {
		m, err := verticalMark(stopped, p.Y.Max)
		if err != nil {
			return nil, err
		}
		p.Add(m)
		p.Legend.Add(fmt.Sprintf("sending stopped (%.1f s)", stopped), m)
	}
	p.Legend.Top = true
	return p, nil
}

// latencyPlot draws the ack-latency histogram on a log axis in ms, with
// p50 and p99.
func latencyPlot(rep *loadgen.Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "ack latency"
	if rep.Loop == "open" {
		p.Title.Text += " (from the intended send time)"
	}
	p.X.Label.Text = "ms (log scale)"
	p.Y.Label.Text = "answers"
	p.Add(plotter.NewGrid())
	if len(rep.LatencyHistogram) == 0 {
		p.Title.Text += ": no answers"
		return p, nil
	}
	h := &plotter.Histogram{FillColor: ackColor, LineStyle: plotter.DefaultLineStyle}
	h.LineStyle.Width = vg.Points(0.3)
	h.LineStyle.Color = color.White
	top := 1.0
	for _, b := range rep.LatencyHistogram {
		h.Bins = append(h.Bins, plotter.HistogramBin{Min: b.FromMillis, Max: b.ToMillis, Weight: float64(b.Count)})
		top = max(top, float64(b.Count))
	}
	p.Add(h)
	p.Y.Min, p.Y.Max = 0, top*1.25
	p.Y.Tick.Marker = wholeTicks{}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = oneTwoFiveTicks{}
	for _, q := range []struct {
		name string
		ms   float64
		dash []vg.Length
	}{{"p50", rep.Latency.P50, nil}, {"p99", rep.Latency.P99, []vg.Length{vg.Points(4), vg.Points(3)}}} {
		if q.ms <= 0 {
			continue
		}
		m, err := verticalMark(q.ms, p.Y.Max)
		if err != nil {
			return nil, err
		}
		m.Dashes = q.dash
		m.Color = color.Black
		p.Add(m)
		p.Legend.Add(fmt.Sprintf("%s %.3g ms", q.name, q.ms), m)
	}
	p.Legend.Top = true
	return p, nil
}

// verticalMark is a dashed grey line at x from 0 to top.
func verticalMark(x, top float64) (*plotter.Line, error) {
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top}})
	if err != nil {
		return nil, err
	}
	l.Color = markColor
	l.Width = vg.Points(1)
	l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	return l, nil
}

// wholeTicks are the default ticks labelled without decimals (counts and
// rates).
type wholeTicks struct{}

func (wholeTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', 0, 64)
		}
	}
	return ticks
}

// oneTwoFiveTicks label 1, 2 and 5 times each power of ten on a log axis
// (plot.LogTicks labels the powers only, too few over one or two
// decades), with unlabelled ticks at the other whole multiples.
type oneTwoFiveTicks struct{}

func (oneTwoFiveTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for p := math.Pow(10, math.Floor(math.Log10(min))); p <= max; p *= 10 {
		for m := 1.0; m < 10; m++ {
			v := m * p
			if v < min || v > max {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
