package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"image/color"
	"log"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// benchReport is the part of a webhookd-bench JSON report (--json) the
// headline chart reads.
type benchReport struct {
	Label   string  `json:"label"`
	Mode    string  `json:"mode"`
	Loop    string  `json:"loop"`
	AckRate float64 `json:"ack_rate"`
	Latency struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"latency_ms"`
	EndToEnd struct {
		Rate     float64  `json:"rate"`
		DrainCPU benchCPU `json:"drain_cpu"`
	} `json:"end_to_end"`
	CPU benchCPU `json:"cpu"`

	file    string // where it was read from
	kind    string // the label's <kind>, e.g. "ack64"
	variant string // the label's <variant>, e.g. "naive"
	smoke   bool   // labelled smoke/<kind>/<variant>: a check of the drawing, not a measurement
}

// benchCPU is a report's CPU per event, in µs.
type benchCPU struct {
	Machine float64 `json:"machine_us_per_ack"`
	Groups  []struct {
		Name         string  `json:"name"`
		MicrosPerAck float64 `json:"us_per_ack"`
	} `json:"groups"`
}

// A headlinePanel is one chart of the headline: for each kind of run it
// shows, one bar per variant at the median of its runs, each run a dot.
type headlinePanel struct {
	title, unit string
	kinds       []string
	// variants is the order of the bars in a group; the median of the
	// last over the first is printed above the last when both ran.
	variants []string
	// value is the figure a run contributes; nil for the CPU panel,
	// which stacks each run's drain CPU by process group.
	value func(benchReport) float64
	// target, when set, is drawn as a dashed line.
	target      float64
	targetLabel string
	// lowerIsBetter leaves the ratio out (a latency).
	lowerIsBetter bool
}

var headlinePanels = []headlinePanel{
	{
		title: "Acks/s, closed loop 64, no worker", unit: "acks/s",
		kinds: []string{"ack64", "ack64-wrk"}, variants: []string{"naive", "webhookd"},
		value: func(r benchReport) float64 { return r.AckRate },
	},
	{
		title: "End to end, closed loop 64", unit: "events/s delivered",
		kinds: []string{"e2e64"}, variants: []string{"before", "after"},
		value:  func(r benchReport) float64 { return r.EndToEnd.Rate },
		target: 3500, targetLabel: "target 3,500/s",
	},
	{
		title: "Delivery CPU per event, by process", unit: "µs of machine CPU per event (drain)",
		kinds: []string{"e2e64"}, variants: []string{"before", "after"},
	},
	{
		title: "Ack p99 at 2,000/s offered", unit: "ms",
		kinds: []string{"open2000"}, variants: []string{"before", "after"},
		value:  func(r benchReport) float64 { return r.Latency.P99 },
		target: 10, targetLabel: "target 10 ms", lowerIsBetter: true,
	},
	{
		// Every request repeats a stored event, so each ack is a repeat
		// delivery recorded.
		title: "Repeats over 5 M stored events", unit: "repeat deliveries/s",
		kinds: []string{"repeats5m"}, variants: []string{"before", "after"},
		value:  func(r benchReport) float64 { return r.AckRate },
		target: 10000, targetLabel: "target 10,000/s",
	},
}

var variantColors = map[string]color.Color{
	"webhookd": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"after":    color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"naive":    color.RGBA{R: 0xd6, G: 0x60, B: 0x1e, A: 0xff},
	"before":   color.RGBA{R: 0xa6, G: 0xc8, B: 0xe0, A: 0xff},
}

// cpuParts are the process groups of the CPU panel, bottom up, with
// their colours; the bench database's backends are one part whatever
// the database is called.
var cpuParts = []struct {
	name string
	c    color.Color
}{
	{"this process", color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
	{"postgres (bench database)", color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}},
	{"redis", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
	{"postgres (other)", color.Gray{Y: 0x90}},
	{"other", color.Gray{Y: 0xc8}},
}

// cpuPart names the part a report's CPU group belongs to.
func cpuPart(group string) string {
	if strings.HasPrefix(group, "postgres (") && group != "postgres (other)" {
		return "postgres (bench database)"
	}
	return group
}

// readRuns reads every *.json report in dir. A run's label is
// <kind>/<variant>, or smoke/<kind>/<variant> for a run that only checks
// the drawing.
func readRuns(dir string) ([]benchReport, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var runs []benchReport
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r benchReport
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		r.file = filepath.Base(f)
		label, smoke := strings.CutPrefix(r.Label, "smoke/")
		kind, variant, ok := strings.Cut(label, "/")
		if !ok || kind == "" || variant == "" {
			return nil, fmt.Errorf("%s: label %q is not <kind>/<variant>", f, r.Label)
		}
		r.kind, r.variant, r.smoke = kind, variant, smoke
		runs = append(runs, r)
	}
	return runs, nil
}

// headlineChart draws the headline of docs/performance.md from the runs
// in dir to path: one panel per kind of run with any runs, panels with
// none left out. With no runs at all it draws nothing.
func headlineChart(dir, path string) error {
	runs, err := readRuns(dir)
	if err != nil {
		return err
	}
	shown := map[string]bool{}
	var plots []*plot.Plot
	for _, hp := range headlinePanels {
		p, kinds, err := hp.draw(runs)
		if err != nil {
			return err
		}
		if p == nil {
			continue
		}
		for _, k := range kinds {
			shown[k] = true
		}
		plots = append(plots, p)
	}
	smoke := false
	for _, r := range runs {
		smoke = smoke || r.smoke
		if !shown[r.kind] {
			log.Printf("%s: no panel shows kind %q (label %q)", r.file, r.kind, r.Label)
		}
	}
	if len(plots) == 0 {
		log.Printf("%s: no runs to draw; %s not written", dir, path)
		return nil
	}

	cols := min(len(plots), 3)
	rows := (len(plots) + cols - 1) / cols
	const titleSpace = 28
	w, h := vg.Length(cols)*4.4*vg.Inch, vg.Length(rows)*3.8*vg.Inch+titleSpace
	c, err := draw.NewFormattedCanvas(w, h, strings.TrimPrefix(filepath.Ext(path), "."))
	if err != nil {
		return err
	}
	dc := draw.New(c)
	title := "Issue 16 headline: bars are medians, dots are runs (docs/runs/issue16)"
	if smoke {
		title += "; SMOKE RUNS, NOT MEASUREMENTS"
	}
	sty := plot.New().Title.TextStyle
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YTop
	dc.FillText(sty, vg.Point{X: w / 2, Y: h - 6}, title)

	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, p := range plots {
		grid[i/cols][i%cols] = p
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(14), PadY: vg.Points(14),
		PadTop: titleSpace, PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(10)}
	for i, row := range plot.Align(grid, tiles, dc) {
		for j, tile := range row {
			if grid[i][j] != nil {
				grid[i][j].Draw(tile)
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// bar is one bar of a panel: a kind's variant and its runs.
type bar struct {
	kind, variant string
	runs          []benchReport
	x             float64
}

// bars groups runs of the panel's kinds into bars, kinds in the panel's
// order and variants in its order (others after, by name), and places
// them with a gap between kinds. It returns the kinds that had runs.
func (hp headlinePanel) bars(runs []benchReport) ([]bar, []string) {
	var (
		out   []bar
		kinds []string
		x     float64
	)
	for _, kind := range hp.kinds {
		byVariant := map[string][]benchReport{}
		for _, r := range runs {
			if r.kind == kind && (hp.value != nil || r.EndToEnd.DrainCPU.Machine > 0) {
				byVariant[r.variant] = append(byVariant[r.variant], r)
			}
		}
		if len(byVariant) == 0 {
			continue
		}
		kinds = append(kinds, kind)
		order := slices.Sorted(maps.Keys(byVariant))
		slices.SortStableFunc(order, func(a, b string) int {
			rank := func(v string) int {
				if i := slices.Index(hp.variants, v); i >= 0 {
					return i
				}
				return len(hp.variants)
			}
			return cmp.Compare(rank(a), rank(b))
		})
		for _, v := range order {
			out = append(out, bar{kind: kind, variant: v, runs: byVariant[v], x: x})
			x++
		}
		x += 0.6
	}
	return out, kinds
}

// draw returns the panel's plot, or nil when none of its kinds ran.
func (hp headlinePanel) draw(runs []benchReport) (*plot.Plot, []string, error) {
	bars, kinds := hp.bars(runs)
	if len(bars) == 0 {
		return nil, nil, nil
	}
	p := plot.New()
	p.Title.Text = hp.title
	p.Y.Label.Text = hp.unit
	p.Add(plotter.NewGrid())
	width := vg.Points(26)
	var (
		ticks  plot.ConstantTicks
		dots   plotter.XYs
		labels plotter.XYLabels
		top    = hp.target
	)
	medians := map[string]float64{} // by kind/variant
	legend := map[string]bool{}
	for _, b := range bars {
		ticks = append(ticks, plot.Tick{Value: b.x, Label: b.variant + "\n" + b.kind})
		var total float64
		if hp.value != nil {
			vals := make([]float64, len(b.runs))
			for i, r := range b.runs {
				vals[i] = hp.value(r)
				dots = append(dots, plotter.XY{X: b.x, Y: vals[i]})
			}
			total = median(vals)
			bc, err := plotter.NewBarChart(plotter.Values{total}, width)
			if err != nil {
				return nil, nil, err
			}
			bc.XMin = b.x
			bc.Color = cmp.Or(variantColors[b.variant], color.Color(color.Gray{Y: 0x80}))
			bc.LineStyle.Width = 0
			p.Add(bc)
			if !legend[b.variant] {
				legend[b.variant] = true
				p.Legend.Add(b.variant, bc)
			}
		} else {
			var below *plotter.BarChart
			for _, part := range cpuParts {
				vals := make([]float64, len(b.runs))
				for i, r := range b.runs {
					for _, g := range r.EndToEnd.DrainCPU.Groups {
						if cpuPart(g.Name) == part.name {
							vals[i] += g.MicrosPerAck
						}
					}
				}
				// The parts are each part's median, so they need not
				// add up to the median machine total printed above.
				bc, err := plotter.NewBarChart(plotter.Values{median(vals)}, width)
				if err != nil {
					return nil, nil, err
				}
				bc.XMin = b.x
				bc.Color = part.c
				bc.LineStyle.Width = 0
				if below != nil {
					bc.StackOn(below)
				}
				below = bc
				p.Add(bc)
				if !legend[part.name] {
					legend[part.name] = true
					p.Legend.Add(part.name, bc)
				}
			}
			vals := make([]float64, len(b.runs))
			for i, r := range b.runs {
				vals[i] = r.EndToEnd.DrainCPU.Machine
				dots = append(dots, plotter.XY{X: b.x, Y: vals[i]})
			}
			total = median(vals)
		}
		medians[b.kind+"/"+b.variant] = total
		text := formatFigure(total)
		if first := hp.variants[0]; !hp.lowerIsBetter && b.variant == hp.variants[len(hp.variants)-1] && medians[b.kind+"/"+first] > 0 {
			text += fmt.Sprintf("\n%.2f× %s", total/medians[b.kind+"/"+first], first)
		}
		labels.XYs = append(labels.XYs, plotter.XY{X: b.x, Y: total})
		labels.Labels = append(labels.Labels, text)
		for _, d := range dots {
			top = max(top, d.Y)
		}
	}
	s, err := plotter.NewScatter(dots)
	if err != nil {
		return nil, nil, err
	}
	s.GlyphStyle.Color = color.Black
	s.GlyphStyle.Radius = vg.Points(2.2)
	p.Add(s)
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign = draw.XCenter
		l.TextStyle[i].YAlign = draw.YBottom
		l.TextStyle[i].Font.Size = vg.Points(9)
	}
	l.Offset = vg.Point{Y: vg.Points(3)}
	p.Add(l)
	last := bars[len(bars)-1].x
	if hp.target > 0 {
		t, err := plotter.NewLine(plotter.XYs{{X: -0.6, Y: hp.target}, {X: last + 0.6, Y: hp.target}})
		if err != nil {
			return nil, nil, err
		}
		t.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		t.Color = color.Gray{Y: 0x60}
		p.Add(t)
		p.Legend.Add(hp.targetLabel, t)
	}
	// The headroom keeps the labels and the legend clear of the bars.
	p.X.Min, p.X.Max = -0.6, last+0.6
	p.Y.Min, p.Y.Max = 0, top*1.45
	p.X.Tick.Marker = ticks
	p.Y.Tick.Marker = wholeTicks{}
	p.Legend.Top = true
	return p, kinds, nil
}

// wholeTicks are the default ticks labelled without decimals.
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

// median is the middle of vals, or the mean of the two middle ones.
func median(vals []float64) float64 {
	if len(vals) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(vals))
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// formatFigure prints a figure with three significant digits, thousands
// separated: 8,139 or 24.3.
func formatFigure(v float64) string {
	if v >= 1000 {
		s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
