package admin

import (
	"fmt"
	"html/template"
	"strings"

	"github.com/webhookd/webhookd/dedupe"
)

// Charts are drawn on the server as small inline SVGs: numbers only, no
// script, no chart library, nothing loaded (the pages' CSP holds). Their
// colours come from admin.css (classes bar, fail, p50, p99).

// Size of a chart, in pixels.
const (
	chartWidth  = 360
	chartHeight = 80
	chartTop    = 12 // room for the scale's label
)

// volumeChart draws a window's calls per bucket as bars, the failed part
// of each in red, with the largest count as the scale.
func volumeChart(h dedupe.DestinationHealth) template.HTML {
	most := 1
	for _, b := range h.Buckets {
		most = max(most, b.Calls)
	}
	var sb strings.Builder
	chartStart(&sb, fmt.Sprintf("calls per %s, at most %d", shortDuration(h.Step), most), fmt.Sprintf("%d calls", most))
	w := float64(chartWidth) / float64(max(len(h.Buckets), 1))
	for i, b := range h.Buckets {
		x := float64(i) * w
		ok := scale(b.Calls-b.Failed, most)
		failed := scale(b.Failed, most)
		if b.Calls > b.Failed {
			fmt.Fprintf(&sb, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%d calls, %d failed</title></rect>`,
				x+1, chartHeight-ok, w-2, ok, b.Calls, b.Failed)
		}
		if b.Failed > 0 {
			fmt.Fprintf(&sb, `<rect class="fail" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%d calls, %d failed</title></rect>`,
				x+1, chartHeight-ok-failed, w-2, failed, b.Calls, b.Failed)
		}
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String()) // numbers and fixed text only
}

// latencyChart draws a window's p50 and p99 call durations per bucket as
// two lines (a bucket without calls leaves a gap), with the largest p99
// as the scale.
func latencyChart(h dedupe.DestinationHealth) template.HTML {
	most := 1.0
	for _, b := range h.Buckets {
		most = max(most, b.P99)
	}
	var sb strings.Builder
	chartStart(&sb, fmt.Sprintf("p50 and p99 call duration per %s, at most %.0f ms", shortDuration(h.Step), most), fmt.Sprintf("%.0f ms", most))
	w := float64(chartWidth) / float64(max(len(h.Buckets), 1))
	for _, line := range []struct {
		class string
		value func(dedupe.HealthBucket) float64
	}{{"p99", func(b dedupe.HealthBucket) float64 { return b.P99 }}, {"p50", func(b dedupe.HealthBucket) float64 { return b.P50 }}} {
		var points []string
		var (
			i0   int     // the bucket of a run's first point
			lone float64 // and its y
		)
		flush := func() {
			if len(points) == 1 { // one point: a line across its bucket
				x := float64(i0) * w
				points = []string{fmt.Sprintf("%.1f,%.1f", x+1, lone), fmt.Sprintf("%.1f,%.1f", x+w-1, lone)}
			}
			if len(points) > 0 {
				fmt.Fprintf(&sb, `<polyline class="%s" points="%s"/>`, line.class, strings.Join(points, " "))
			}
			points = nil
		}
		for i, b := range h.Buckets {
			if b.Calls == 0 {
				flush()
				continue
			}
			y := chartHeight - line.value(b)/most*(chartHeight-chartTop)
			if len(points) == 0 {
				i0, lone = i, y
			}
			points = append(points, fmt.Sprintf("%.1f,%.1f", float64(i)*w+w/2, y))
		}
		flush()
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String()) // numbers and fixed text only
}

// chartStart opens a chart's svg with its accessible label, its base
// line and its scale's label.
func chartStart(sb *strings.Builder, label, top string) {
	fmt.Fprintf(sb, `<svg class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		chartWidth, chartHeight, chartWidth, chartHeight, template.HTMLEscapeString(label))
	fmt.Fprintf(sb, `<line class="axis" x1="0" y1="%d" x2="%d" y2="%d"/><text class="scale" x="2" y="10">%s</text>`,
		chartHeight, chartWidth, chartHeight, template.HTMLEscapeString(top))
}

// scale is n's bar height for a chart whose largest value is most.
func scale(n, most int) float64 {
	return float64(n) / float64(most) * (chartHeight - chartTop)
}
