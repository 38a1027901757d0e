// Command plots draws the charts of docs/performance.md from the raw
// runs, so a chart cannot say what the runs do not: for the Batch 8
// charts it reads each run's report from the appendix's Batch 8 in
// docs/performance-runs.md, writes the figures it used to batch8.csv, and
// draws the PNGs from them; for the issue 16 headline (issue16.go) it
// reads the webhookd-bench JSON reports in docs/runs/issue16.
//
// It is part of the bench module (bench/go.mod), so the product's go.mod
// carries no plotting library. From this directory:
//
//	go run .
package main

import (
	"bufio"
	"encoding/csv"
	"flag"
	"fmt"
	"image/color"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// run is one run's report, as the load generator printed it.
type run struct {
	ID       string // the appendix's heading, e.g. "10-ack64-new-b"
	Label    string // the chart's label
	Binary   string // webhookd (new), base or naive
	AcksPerS float64
	P50, P99 float64 // ms
	Machine  float64 // µs of the whole machine per ack
	Process  float64 // this process: webhookd, the generator and the sink
	Postgres float64 // the bench database's backends
	Redis    float64
	PgOther  float64 // other Postgres processes (WAL writer, checkpointer…)
	Other    float64 // everyone else on the shared machine
}

// The runs each chart shows, in the order they ran. Labels name the run
// number of the appendix.
var (
	closedLoop = []run{
		{ID: "07-ack64-base-a", Label: "07", Binary: "base"},
		{ID: "08-ack64-new-a", Label: "08", Binary: "webhookd"},
		{ID: "09-ack64-base-b", Label: "09", Binary: "base"},
		{ID: "10-ack64-new-b", Label: "10", Binary: "webhookd"},
		{ID: "11-ack64-base-c", Label: "11", Binary: "base"},
		{ID: "12-ack64-new-c", Label: "12", Binary: "webhookd"},
		{ID: "19-naive-a", Label: "19", Binary: "naive"},
		{ID: "20-ack64-new-vs-naive-a", Label: "20", Binary: "webhookd"},
		{ID: "21-naive-b", Label: "21", Binary: "naive"},
		{ID: "22-ack64-new-vs-naive-b", Label: "22", Binary: "webhookd"},
	}
	cpuRuns = []run{
		{ID: "19-naive-a", Label: "naive\n19", Binary: "naive"},
		{ID: "20-ack64-new-vs-naive-a", Label: "webhookd\n20", Binary: "webhookd"},
		{ID: "21-naive-b", Label: "naive\n21", Binary: "naive"},
		{ID: "22-ack64-new-vs-naive-b", Label: "webhookd\n22", Binary: "webhookd"},
		{}, // a gap between groups
		{ID: "14-open2000-new-a", Label: "2,000/s\n14", Binary: "webhookd"},
		{ID: "16-open2000-new-b", Label: "2,000/s\n16", Binary: "webhookd"},
		{ID: "18-open2000-new-c", Label: "2,000/s\n18", Binary: "webhookd"},
		{},
		{ID: "24-e2e-new-a", Label: "e2e\n24", Binary: "webhookd"},
		{ID: "26-e2e-new-b", Label: "e2e\n26", Binary: "webhookd"},
	}
)

func main() {
	appendix := flag.String("runs", "../../docs/performance-runs.md", "the appendix with the raw runs")
	issue16 := flag.String("issue16", "../../docs/runs/issue16", "the issue 16 runs: webhookd-bench JSON reports labelled <kind>/<variant>")
	out := flag.String("out", ".", "directory for batch8.csv and the PNGs")
	flag.Parse()

	reports, err := batch8(*appendix)
	if err != nil {
		log.Fatal(err)
	}
	fill := func(rs []run) {
		for i := range rs {
			if rs[i].ID == "" {
				continue
			}
			r, ok := reports[rs[i].ID]
			if !ok {
				log.Fatalf("run %s not in Batch 8 of %s", rs[i].ID, *appendix)
			}
			r.ID, r.Label, r.Binary = rs[i].ID, rs[i].Label, rs[i].Binary
			rs[i] = r
		}
	}
	fill(closedLoop)
	fill(cpuRuns)

	if err := writeCSV(filepath.Join(*out, "batch8.csv"), append(append([]run{}, closedLoop...), cpuRuns...)); err != nil {
		log.Fatal(err)
	}
	if err := acksChart(filepath.Join(*out, "acks-alternated.png")); err != nil {
		log.Fatal(err)
	}
	if err := cpuChart(filepath.Join(*out, "cpu-per-ack.png")); err != nil {
		log.Fatal(err)
	}
	if err := headlineChart(*issue16, filepath.Join(*out, "issue16-headline.png")); err != nil {
		log.Fatal(err)
	}
}

var (
	reAcks    = regexp.MustCompile(`^acks \(2xx\)\s+\d+, (\d+)/s`)
	reLatency = regexp.MustCompile(`^ack latency\s+p50 ([\d.]+) ms, .*p99 ([\d.]+) ms`)
	reMachine = regexp.MustCompile(`^cpu per ack\s+machine (\d+) µs`)
	rePart    = regexp.MustCompile(`^\s+(this process|postgres \(other\)|postgres \(webhookd_bench\w*\)|redis|other)\s+(\d+) µs/ack`)
)

// batch8 reads the reports of the appendix's Batch 8, by run heading.
func batch8(path string) (map[string]run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	reports := map[string]run{}
	var (
		inBatch, inFence bool
		cur              string
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if !inFence && strings.HasPrefix(line, "### ") {
			inBatch = line == "### Batch 8"
			continue
		}
		if !inBatch {
			continue
		}
		if !inFence {
			if id, ok := strings.CutPrefix(line, "#### "); ok {
				cur = id
				reports[cur] = run{ID: cur}
			}
			continue
		}
		if cur == "" {
			continue
		}
		r := reports[cur]
		num := func(s string) float64 {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				log.Fatalf("%s: %q: %v", cur, line, err)
			}
			return v
		}
		if m := reAcks.FindStringSubmatch(line); m != nil {
			r.AcksPerS = num(m[1])
		} else if m := reLatency.FindStringSubmatch(line); m != nil {
			r.P50, r.P99 = num(m[1]), num(m[2])
		} else if m := reMachine.FindStringSubmatch(line); m != nil {
			r.Machine = num(m[1])
		} else if m := rePart.FindStringSubmatch(line); m != nil {
			v := num(m[2])
			switch name := m[1]; {
			case name == "this process":
				r.Process = v
			case name == "postgres (other)":
				r.PgOther = v
			case strings.HasPrefix(name, "postgres ("): // the bench database's backends
				r.Postgres = v
			case name == "redis":
				r.Redis = v
			case name == "other":
				r.Other = v
			}
		}
		reports[cur] = r
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(reports) == 0 {
		return nil, fmt.Errorf("%s: no runs under \"### Batch 8\"", path)
	}
	return reports, nil
}

func writeCSV(path string, runs []run) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := csv.NewWriter(f)
	_ = w.Write([]string{"run", "binary", "acks_per_s", "p50_ms", "p99_ms", "machine_us", "process_us", "postgres_us", "redis_us", "postgres_other_us", "other_us"})
	seen := map[string]bool{}
	for _, r := range runs {
		if r.ID == "" || seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		g := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
		_ = w.Write([]string{r.ID, r.Binary, g(r.AcksPerS), g(r.P50), g(r.P99), g(r.Machine), g(r.Process), g(r.Postgres), g(r.Redis), g(r.PgOther), g(r.Other)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return f.Close()
}

var colors = map[string]color.Color{
	"webhookd": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"base":     color.RGBA{R: 0xa6, G: 0xc8, B: 0xe0, A: 0xff},
	"naive":    color.RGBA{R: 0xd6, G: 0x60, B: 0x1e, A: 0xff},
}

// acksChart draws acks/s of the alternated closed-loop runs, one bar per
// run in the order they ran, coloured by binary, with the 8,000/s target.
func acksChart(path string) error {
	p := plot.New()
	p.Add(plotter.NewGrid())
	p.Title.Text = "Acks/s, closed loop 64, no worker, 15 s runs alternated (Batch 8)"
	p.Y.Label.Text = "acks/s"
	p.X.Label.Text = "run (appendix, Batch 8)"
	p.Y.Min, p.Y.Max = 0, 11000
	w := vg.Points(18)
	names := make([]string, len(closedLoop))
	for i, r := range closedLoop {
		names[i] = r.Label
	}
	for _, binary := range []string{"webhookd", "base", "naive"} {
		vals := make(plotter.Values, len(closedLoop))
		for i, r := range closedLoop {
			if r.Binary == binary {
				vals[i] = r.AcksPerS
			}
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		b.Color = colors[binary]
		b.LineStyle.Width = 0
		p.Add(b)
		label := map[string]string{
			"webhookd": "webhookd (bb3a9e7)",
			"base":     "second pass's binary (91b53f7)",
			"naive":    "naive ingest",
		}[binary]
		p.Legend.Add(label, b)
	}
	target, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 8000}, {X: float64(len(closedLoop)) - 0.5, Y: 8000}})
	if err != nil {
		return err
	}
	target.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	target.Color = color.Gray{Y: 0x60}
	p.Add(target)
	p.Legend.Add("target 8,000/s", target)
	p.Legend.Top = true
	p.Legend.Left = true
	p.NominalX(names...)
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}

// cpuChart draws machine CPU per ack split by process, stacked.
func cpuChart(path string) error {
	p := plot.New()
	p.Add(plotter.NewGrid())
	p.Title.Text = "Machine CPU per ack, by process (Batch 8)"
	p.Y.Label.Text = "µs per ack"
	p.X.Label.Text = "run (appendix, Batch 8): closed loop 64 · 2,000/s offered · closed loop 64 with the worker"
	w := vg.Points(26)
	parts := []struct {
		name  string
		value func(run) float64
		c     color.Color
	}{
		{"this process (webhookd, generator, sink)", func(r run) float64 { return r.Process }, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
		{"Postgres (bench database)", func(r run) float64 { return r.Postgres }, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}},
		{"Redis", func(r run) float64 { return r.Redis }, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
		{"other Postgres and everyone else", func(r run) float64 { return r.PgOther + r.Other }, color.Gray{Y: 0xb0}},
	}
	var below *plotter.BarChart
	for _, part := range parts {
		vals := make(plotter.Values, len(cpuRuns))
		for i, r := range cpuRuns {
			vals[i] = part.value(r)
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		b.Color = part.c
		b.LineStyle.Width = 0
		if below != nil {
			b.StackOn(below)
		}
		below = b
		p.Add(b)
		p.Legend.Add(part.name, b)
	}
	// The machine's total per run above its bar (the parts, rounded per
	// line by the generator, may differ from it by a microsecond or two).
	var labels plotter.XYLabels
	for i, r := range cpuRuns {
		if r.ID == "" {
			continue
		}
		labels.XYs = append(labels.XYs, plotter.XY{X: float64(i), Y: r.Process + r.Postgres + r.Redis + r.PgOther + r.Other + 12})
		labels.Labels = append(labels.Labels, strconv.FormatFloat(r.Machine, 'f', 0, 64))
	}
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign = draw.XCenter
	}
	p.Add(l)
	names := make([]string, len(cpuRuns))
	for i, r := range cpuRuns {
		names[i] = r.Label
	}
	p.NominalX(names...)
	p.Y.Min, p.Y.Max = 0, 800
	p.Legend.Top = true
	p.Legend.Left = true
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}
