// Command webhookd-dashboard draws a Grafana dashboard's panels as one
// PNG: it reads the dashboard's JSON (deploy/grafana/webhookd.json), runs
// every panel's PromQL queries over a time range against a real
// Prometheus, and draws each panel as a small time-series chart, titled
// and with the legends as the dashboard writes them. It is how the
// README's dashboard image is made from a real run
// (docs/dashboard-run.sh), without a Grafana server.
//
//	webhookd-dashboard --prometheus http://127.0.0.1:9090 --from 2026-12-04T23:50:00Z --to 2026-12-04T23:54:00Z \
//	  --var namespace=demo --var job=webhookd --out docs/dashboard.png
//
// Stat panels are drawn as their series over the range, the last value in
// the title; table panels are left out, and so are series that stay at 0
// while others move. Variables not given match
// everything (".*"); Grafana's interval variables take --rate-interval.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// dashboard is the part of a Grafana dashboard's JSON this draws.
type dashboard struct {
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
}

// panel is one Grafana panel.
type panel struct {
	Type    string   `json:"type"`
	Title   string   `json:"title"`
	Targets []target `json:"targets"`
	// FieldConfig.Defaults.Unit is the panel's unit ("reqps", "s").
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

// target is one query of a panel.
type target struct {
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
}

func main() {
	var (
		promURL      = flag.String("prometheus", "http://127.0.0.1:9090", "the Prometheus to query")
		file         = flag.String("dashboard", "deploy/grafana/webhookd.json", "the Grafana dashboard's JSON")
		fromS        = flag.String("from", "", "start of the range (RFC 3339); required")
		toS          = flag.String("to", "", "end of the range (RFC 3339); required")
		step         = flag.Duration("step", 5*time.Second, "resolution of each query")
		rateInterval = flag.String("rate-interval", "30s", "what $__rate_interval and $__interval stand for")
		out          = flag.String("out", "dashboard.png", "the PNG to write")
		columns      = flag.Int("columns", 3, "panels per row")
		vars         varFlags
	)
	flag.Var(&vars, "var", "a dashboard variable's value, name=value (repeatable)")
	flag.Parse()
	from, err := time.Parse(time.RFC3339, *fromS)
	if err != nil {
		log.Fatalf("--from: %v", err)
	}
	to, err := time.Parse(time.RFC3339, *toS)
	if err != nil {
		log.Fatalf("--to: %v", err)
	}
	if !to.After(from) {
		log.Fatal("--to must be after --from")
	}
	d, err := readDashboard(*file)
	if err != nil {
		log.Fatal(err)
	}
	client, err := api.NewClient(api.Config{Address: *promURL})
	if err != nil {
		log.Fatalf("prometheus client: %v", err)
	}
	q := querier{api: promv1.NewAPI(client), r: promv1.Range{Start: from, End: to, Step: *step}, vars: vars, interval: *rateInterval}
	var plots []*plot.Plot
	for _, p := range d.Panels {
		if p.Type != "timeseries" && p.Type != "stat" {
			continue
		}
		pl, err := q.draw(context.Background(), p, from)
		if err != nil {
			log.Fatalf("panel %q: %v", p.Title, err)
		}
		plots = append(plots, pl)
	}
	if len(plots) == 0 {
		log.Fatalf("%s has no time-series or stat panel", *file)
	}
	if err := writeGrid(*out, plots, *columns); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d panels of %q, %s to %s\n", *out, len(plots), d.Title, from.Format(time.RFC3339), to.Format(time.RFC3339))
}

// varFlags collects --var name=value.
type varFlags map[string]string

func (v *varFlags) String() string { return fmt.Sprint(map[string]string(*v)) }

func (v *varFlags) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want name=value, not %q", s)
	}
	if *v == nil {
		*v = varFlags{}
	}
	(*v)[name] = value
	return nil
}

func readDashboard(path string) (dashboard, error) {
	var d dashboard
	b, err := os.ReadFile(path)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// querier runs a panel's queries over one range.
type querier struct {
	api      promv1.API
	r        promv1.Range
	vars     map[string]string
	interval string
}

// variable is a Grafana variable in a query: $name or ${name}.
var variable = regexp.MustCompile(`\$\{?(\w+)\}?`)

// expand replaces the dashboard's variables in expr as Grafana would
// with the values given (unset ones match everything).
func (q querier) expand(expr string) string {
	return variable.ReplaceAllStringFunc(expr, func(m string) string {
		name := strings.Trim(m, "${}")
		switch name {
		case "__rate_interval", "__interval":
			return q.interval
		case "__range":
			return model.Duration(q.r.End.Sub(q.r.Start)).String()
		}
		if v, ok := q.vars[name]; ok {
			return regexp.QuoteMeta(v)
		}
		return ".*"
	})
}

// legendLabel is {{label}} in a legend format.
var legendLabel = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

// draw runs p's queries and draws their series; x is seconds since from.
func (q querier) draw(ctx context.Context, p panel, from time.Time) (*plot.Plot, error) {
	pl := plot.New()
	pl.X.Label.Text = "minutes since " + from.UTC().Format("15:04:05")
	pl.Y.Label.Text = p.FieldConfig.Defaults.Unit
	pl.Legend.Top = true
	pl.Legend.Left = true
	pl.Title.TextStyle.Font.Size = vg.Points(11)
	type named struct {
		name string
		xys  plotter.XYs
	}
	var all []named
	for _, t := range p.Targets {
		v, warnings, _, err := q.api.QueryRange(ctx, q.expand(t.Expr), q.r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.Expr, err)
		}
		if len(warnings) > 0 {
			log.Printf("panel %q: %v", p.Title, warnings)
		}
		m, ok := v.(model.Matrix)
		if !ok {
			return nil, fmt.Errorf("%s: a %s, not a range", t.Expr, v.Type())
		}
		for _, s := range m {
			name := legendLabel.ReplaceAllStringFunc(t.LegendFormat, func(l string) string {
				return string(s.Metric[model.LabelName(legendLabel.FindStringSubmatch(l)[1])])
			})
			if name == "" {
				name = s.Metric.String()
			}
			var xys plotter.XYs
			for _, sp := range s.Values {
				y := float64(sp.Value)
				if math.IsNaN(y) || math.IsInf(y, 0) {
					continue
				}
				xys = append(xys, plotter.XY{X: sp.Timestamp.Time().Sub(from).Minutes(), Y: y})
			}
			if len(xys) > 0 {
				all = append(all, named{name, xys})
			}
		}
	}
	// Series that stay at 0 are left out (Grafana's legend option "hide
	// series with only zeros"), unless every one does: then the zero line
	// is the panel's news.
	var moved []named
	for _, s := range all {
		if slices.ContainsFunc(s.xys, func(xy plotter.XY) bool { return xy.Y != 0 }) {
			moved = append(moved, s)
		}
	}
	if len(moved) > 0 {
		all = moved
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].name < all[j].name })
	pl.Title.Text = p.Title
	if len(all) == 0 {
		pl.Title.Text += " (no data)"
		return pl, nil
	}
	if p.Type == "stat" && len(all) == 1 {
		last := all[0].xys[len(all[0].xys)-1].Y
		pl.Title.Text += fmt.Sprintf(" — last %s", humanize(last, p.FieldConfig.Defaults.Unit))
	}
	for i, s := range all {
		line, err := plotter.NewLine(s.xys)
		if err != nil {
			return nil, err
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.2)
		pl.Add(line)
		if len(all) > 1 || s.name != "{}" {
			pl.Legend.Add(s.name, line)
		}
	}
	pl.Y.Min = math.Min(pl.Y.Min, 0)
	pl.Add(plotter.NewGrid())
	return pl, nil
}

// humanize writes v in the panel's unit, briefly.
func humanize(v float64, unit string) string {
	switch unit {
	case "s":
		return time.Duration(v * float64(time.Second)).Round(100 * time.Microsecond).String()
	case "reqps", "ops":
		return fmt.Sprintf("%.0f/s", v)
	}
	return fmt.Sprintf("%.4g", v)
}

// writeGrid draws plots in rows of columns into one PNG.
func writeGrid(path string, plots []*plot.Plot, columns int) error {
	if columns < 1 {
		return errors.New("--columns must be at least 1")
	}
	rows := (len(plots) + columns - 1) / columns
	const tileW, tileH = 5 * vg.Inch, 3 * vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(tileW*vg.Length(columns), tileH*vg.Length(rows)), vgimg.UseDPI(96))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: columns, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, columns)
	}
	for i, p := range plots {
		grid[i/columns][i%columns] = p
	}
	canvases := plot.Align(grid, tiles, dc)
	for r := range grid {
		for c, p := range grid[r] {
			if p != nil {
				p.Draw(canvases[r][c])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
