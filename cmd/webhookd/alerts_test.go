package main

import (
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// alertRow matches a row of the README's alert table and captures its
// first cell, which names one or more series in backticks.
var alertRow = regexp.MustCompile("^\\| (`webhookd_[^|]*(?:\\\\\\|[^|]*)*) \\|")

// selector is one series an alert watches: a metric and label matchers.
type selector struct {
	text   string
	metric string
	labels map[string]*regexp.Regexp
}

// readmeAlertSelectors returns every series the README's alert table
// names, as `metric` or `metric{label="v"}` or `{label=~"re"}` (which
// reuses the metric before it in the same cell).
func readmeAlertSelectors(t *testing.T) []selector {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([^`]*)`")
	sel := regexp.MustCompile(`^(webhookd_[a-z_]+)?(?:\{(.*)\})?$`)
	matcher := regexp.MustCompile(`([a-z_]+)(=~|=)"((?:[^"\\]|\\.)*)"`)
	var out []selector
	for line := range strings.SplitSeq(string(readme), "\n") {
		m := alertRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		metric := ""
		for _, c := range code.FindAllStringSubmatch(m[1], -1) {
			s := sel.FindStringSubmatch(c[1])
			if s == nil {
				t.Fatalf("README alert table: cannot read %q", c[1])
			}
			if s[1] != "" {
				metric = s[1]
			}
			if metric == "" {
				t.Fatalf("README alert table: %q names no metric", c[1])
			}
			labels := map[string]*regexp.Regexp{}
			for _, lm := range matcher.FindAllStringSubmatch(s[2], -1) {
				v := strings.ReplaceAll(lm[3], `\|`, `|`)
				if lm[2] == "=" {
					v = regexp.QuoteMeta(v)
				}
				labels[lm[1]] = regexp.MustCompile("^(?:" + v + ")$")
			}
			out = append(out, selector{text: c[1], metric: metric, labels: labels})
		}
	}
	if len(out) < 10 {
		t.Fatalf("read only %d series from the README's alert table", len(out))
	}
	return out
}

// TestREADMEAlertSeriesExistAtStart: every series the README's alert
// table names is exported by a freshly started process (gateway and
// worker, one source and destination) before any event, so an
// increase() or absent-free alert sees its first event.
func TestREADMEAlertSeriesExistAtStart(t *testing.T) {
	t.Parallel()
	selectors := readmeAlertSelectors(t)
	p := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"billing": "http://127.0.0.1:1/"}})

	resp, err := http.Get(p.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range selectors {
		fam, ok := families[s.metric]
		found := false
		if ok {
		series:
			for _, m := range fam.GetMetric() {
				got := map[string]string{}
				for _, lp := range m.GetLabel() {
					got[lp.GetName()] = lp.GetValue()
				}
				for name, re := range s.labels {
					if !re.MatchString(got[name]) {
						continue series
					}
				}
				found = true
				break
			}
		}
		if !found {
			t.Errorf("README alerts on %s (%s), but a fresh process exports no such series", s.text, s.metric)
		}
	}
}
