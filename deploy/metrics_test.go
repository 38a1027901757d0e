package deploy

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/webhookd/webhookd/alerts"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// The kit's files, relative to this package.
const (
	dashboardFile  = "grafana/webhookd.json"
	alertsFile     = "prometheus/alerts.yaml"
	alertTestsFile = "prometheus/alerts_test.yaml"
)

// targetLabels are the labels Prometheus adds to what it scrapes (the
// chart's ServiceMonitor: namespace, job, instance, pod, container,
// endpoint, service and the pod's component). A process never exports
// them, so a query or a test series may use them freely.
var targetLabels = map[string]bool{
	"namespace": true, "job": true, "instance": true, "pod": true, "container": true,
	"endpoint": true, "service": true, "app_kubernetes_io_component": true,
}

// deploymentLabels take values each deployment chooses (its sources,
// destinations and queue names, its build): a test series may give them
// any value. Every other label's values are webhookd's own (an outcome, a
// state, a class) and must be ones it exports.
var deploymentLabels = map[string]bool{
	"source": true, "destination": true, "queue": true, "version": true, "revision": true, "go_version": true,
}

// series is one series a process exports.
type series struct {
	name   string
	labels map[string]string
}

func (s series) String() string {
	names := make([]string, 0, len(s.labels))
	for n := range s.labels {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s=%q", n, s.labels[n]))
	}
	return s.name + "{" + strings.Join(parts, ",") + "}"
}

// TestDeployKitNamesExportedSeries starts a webhookd process (gateway and
// worker, one source and destination), reads its /metrics before any
// event, and checks the deploy kit against it: every query of the
// dashboard and every alert rule names series the process exports (with
// label values it exports), every input series of the alert rules'
// promtool tests is shaped like an exported one, and every alert has a
// test in which it fires.
func TestDeployKitNamesExportedSeries(t *testing.T) {
	t.Parallel()
	exported := exportedSeries(t)

	t.Run("Dashboard", func(t *testing.T) {
		t.Parallel()
		exprs := dashboardQueries(t)
		if len(exprs) < 20 {
			t.Fatalf("read only %d queries from %s", len(exprs), dashboardFile)
		}
		for where, expr := range exprs {
			checkQuery(t, where, expr, exported)
		}
	})

	t.Run("AlertRules", func(t *testing.T) {
		t.Parallel()
		rules := alertRules(t)
		if len(rules) < 10 {
			t.Fatalf("read only %d alerts from %s", len(rules), alertsFile)
		}
		for name, expr := range rules {
			checkQuery(t, alertsFile+": "+name, expr, exported)
		}
	})

	t.Run("AlertTestSeries", func(t *testing.T) {
		t.Parallel()
		tests := alertTests(t)
		n := 0
		for _, tc := range tests.Tests {
			for _, in := range tc.InputSeries {
				n++
				checkTestSeries(t, alertTestsFile+": "+tc.Name, in.Series, exported)
			}
		}
		if n < 10 {
			t.Fatalf("read only %d input series from %s", n, alertTestsFile)
		}
	})

	t.Run("EveryAlertFiresInATest", func(t *testing.T) {
		t.Parallel()
		rules := alertRules(t)
		fires := map[string]bool{}
		for _, tc := range alertTests(t).Tests {
			for _, rt := range tc.AlertRuleTest {
				if _, ok := rules[rt.Alertname]; !ok {
					t.Errorf("%s: test %s evaluates %s, which %s does not define", alertTestsFile, tc.Name, rt.Alertname, alertsFile)
				}
				if len(rt.ExpAlerts) > 0 {
					fires[rt.Alertname] = true
				}
			}
		}
		for name := range rules {
			if !fires[name] {
				t.Errorf("%s: alert %s has no test in %s where it fires", alertsFile, name, alertTestsFile)
			}
		}
	})
}

// exportedSeries starts a process and returns every series on its
// /metrics, a histogram's as its _bucket (with le), _sum and _count
// series, as Prometheus stores them.
func exportedSeries(t *testing.T) []series {
	t.Helper()
	// An alert channel, so the alert messages' series exist too; it is
	// never sent to (no issue opens before /metrics is read).
	channels, err := alerts.NewChannels(alerts.Spec{Channels: []alerts.ChannelSpec{{Webhook: &alerts.WebhookSpec{
		URL: "http://127.0.0.1:1/", SigningSecret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("deploy-kit-test-secret-32-bytes!")),
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	p := pipelinetest.Start(t, pipelinetest.Options{
		Destinations: map[string]string{"billing": "http://127.0.0.1:1/"},
		Alerts:       alerts.NotifierConfig{Channels: channels},
	})
	resp, err := http.Get(p.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	var out []series
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			with := func(suffix string, extra ...string) series {
				l := make(map[string]string, len(labels)+1)
				for k, v := range labels {
					l[k] = v
				}
				for i := 0; i+1 < len(extra); i += 2 {
					l[extra[i]] = extra[i+1]
				}
				return series{name: name + suffix, labels: l}
			}
			switch fam.GetType().String() {
			case "HISTOGRAM":
				for _, b := range m.GetHistogram().GetBucket() {
					out = append(out, with("_bucket", "le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)))
				}
				out = append(out, with("_bucket", "le", "+Inf"), with("_sum"), with("_count"))
			case "SUMMARY":
				for _, q := range m.GetSummary().GetQuantile() {
					out = append(out, with("", "quantile", strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)))
				}
				out = append(out, with("_sum"), with("_count"))
			default:
				out = append(out, with(""))
			}
		}
	}
	if len(out) < 50 {
		t.Fatalf("read only %d series from /metrics", len(out))
	}
	return out
}

// selectorRE finds a series selector: a webhookd metric and its label
// matchers, if any.
var selectorRE = regexp.MustCompile(`(webhookd_[a-zA-Z0-9_:]*)(\s*\{[^}]*\})?`)

// matcherRE reads one label matcher inside braces.
var matcherRE = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)`)

// alternativesRE is a regular expression made only of alternatives
// (outcome=~"done|dead"): each is checked on its own, so one misspelt
// value is not hidden by the others.
var alternativesRE = regexp.MustCompile(`^[A-Za-z0-9_]+(\|[A-Za-z0-9_]+)+$`)

// labelValuesRE reads a Grafana variable query label_values(selector, label).
var labelValuesRE = regexp.MustCompile(`^\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// matcher is one label matcher of a selector.
type matcher struct {
	label, op, value string
}

// matches reports whether a series' label value (empty when it lacks the
// label, as in Prometheus) satisfies m.
func (m matcher) matches(v string) bool {
	switch m.op {
	case "=":
		return v == m.value
	case "!=":
		return v != m.value
	}
	re, err := regexp.Compile("^(?:" + m.value + ")$")
	if err != nil {
		return false
	}
	return re.MatchString(v) == (m.op == "=~")
}

// parseMatchers reads the matchers inside a selector's braces.
func parseMatchers(braces string) ([]matcher, error) {
	rest := strings.TrimSpace(braces)
	rest = strings.TrimSuffix(strings.TrimPrefix(rest, "{"), "}")
	var out []matcher
	for strings.TrimSpace(rest) != "" {
		m := matcherRE.FindStringSubmatch(rest)
		if m == nil {
			return nil, fmt.Errorf("cannot read the matcher at %q", rest)
		}
		v, err := strconv.Unquote(`"` + m[3] + `"`)
		if err != nil {
			return nil, fmt.Errorf("cannot read the value %q: %w", m[3], err)
		}
		out = append(out, matcher{label: m[1], op: m[2], value: v})
		rest = rest[len(m[0]):]
	}
	return out, nil
}

// checkQuery checks that a PromQL query names at least one series, names
// every series by a webhookd metric, and that each selector (and each
// alternative of a matcher's alternatives) matches a series the process
// exports. A matcher on a target label, or whose value holds a Grafana
// variable ($source), could match anything and is left out.
func checkQuery(t *testing.T, where, expr string, exported []series) {
	t.Helper()
	label := ""
	if m := labelValuesRE.FindStringSubmatch(expr); m != nil {
		expr, label = m[1], m[2]
	}
	found := selectorRE.FindAllStringSubmatch(expr, -1)
	if len(found) == 0 {
		t.Errorf("%s: the query names no webhookd series: %s", where, expr)
		return
	}
	if rest := selectorRE.ReplaceAllString(expr, ""); strings.Contains(rest, "{") {
		t.Errorf("%s: a selector names no webhookd metric: %s", where, expr)
	}
	for _, sel := range found {
		matchers, err := parseMatchers(sel[2])
		if err != nil {
			t.Errorf("%s: %s: %v", where, sel[0], err)
			continue
		}
		var kept []matcher
		for _, m := range matchers {
			if !targetLabels[m.label] && !strings.Contains(m.value, "$") {
				kept = append(kept, m)
			}
		}
		for _, variant := range alternatives(kept) {
			matched := matching(exported, sel[1], variant)
			if len(matched) == 0 {
				t.Errorf("%s: %s matches no series a started process exports%s", where, selectorText(sel[1], variant), nearest(exported, sel[1]))
				continue
			}
			if label != "" && !targetLabels[label] && !slices.ContainsFunc(matched, func(s series) bool { _, ok := s.labels[label]; return ok }) {
				t.Errorf("%s: label_values asks for %s, which %s does not carry", where, label, sel[1])
			}
		}
	}
}

// alternatives returns the matcher sets to check: ms itself, or one set per
// alternative of each regular expression made only of alternatives.
func alternatives(ms []matcher) [][]matcher {
	sets := [][]matcher{nil}
	for _, m := range ms {
		values := []string{m.value}
		op := m.op
		if m.op == "=~" && alternativesRE.MatchString(m.value) {
			values, op = strings.Split(m.value, "|"), "="
		}
		var next [][]matcher
		for _, set := range sets {
			for _, v := range values {
				next = append(next, append(slices.Clone(set), matcher{label: m.label, op: op, value: v}))
			}
		}
		sets = next
	}
	return sets
}

// matching returns the exported series of metric name that satisfy ms.
func matching(exported []series, name string, ms []matcher) []series {
	var out []series
	for _, s := range exported {
		if s.name != name {
			continue
		}
		if !slices.ContainsFunc(ms, func(m matcher) bool { return !m.matches(s.labels[m.label]) }) {
			out = append(out, s)
		}
	}
	return out
}

// checkTestSeries checks one input series of the promtool tests: a webhookd
// metric with exact labels, of which (target labels aside) an exported
// series has the same names, and the same values but for
// deploymentLabels.
func checkTestSeries(t *testing.T, where, text string, exported []series) {
	t.Helper()
	sel := selectorRE.FindStringSubmatch(text)
	if sel == nil || strings.TrimSpace(text) != sel[0] {
		t.Errorf("%s: input series %q is not a webhookd series", where, text)
		return
	}
	matchers, err := parseMatchers(sel[2])
	if err != nil {
		t.Errorf("%s: %s: %v", where, text, err)
		return
	}
	want := map[string]string{}
	for _, m := range matchers {
		if m.op != "=" {
			t.Errorf("%s: %s: an input series gives labels with =", where, text)
			return
		}
		if !targetLabels[m.label] {
			want[m.label] = m.value
		}
	}
	for _, s := range exported {
		if s.name != sel[1] || len(s.labels) != len(want) {
			continue
		}
		same := true
		for name, v := range want {
			got, ok := s.labels[name]
			if !ok || (!deploymentLabels[name] && got != v) {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	t.Errorf("%s: input series %s is not shaped like any series a started process exports%s", where, text, nearest(exported, sel[1]))
}

// nearest lists a few exported series of the metric, for an error message.
func nearest(exported []series, name string) string {
	var names []string
	for _, s := range exported {
		if s.name == name {
			names = append(names, s.String())
		}
	}
	if len(names) == 0 {
		return " (the process exports no " + name + ")"
	}
	sort.Strings(names)
	if len(names) > 6 {
		names = append(names[:6], "…")
	}
	return "; it exports " + strings.Join(names, " ")
}

// selectorText writes a selector back, for an error message.
func selectorText(name string, ms []matcher) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%s%s%q", m.label, m.op, m.value))
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// dashboardPanel is the part of a Grafana panel the test reads; a row
// holds its panels when collapsed.
type dashboardPanel struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

// dashboardQueries returns every PromQL query of the dashboard, by where
// it is: each panel target's expr and each query variable's query.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels     []dashboardPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	out := map[string]string{}
	var walk func([]dashboardPanel)
	walk = func(panels []dashboardPanel) {
		for _, p := range panels {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", dashboardFile, p.Title)
			}
			for i, tg := range p.Targets {
				where := fmt.Sprintf("%s: panel %q query %d", dashboardFile, p.Title, i+1)
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s is empty", where)
					continue
				}
				out[where] = tg.Expr
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				t.Fatalf("%s: variable %s: %v", dashboardFile, v.Name, err)
			}
		}
		out[fmt.Sprintf("%s: variable %s", dashboardFile, v.Name)] = q.Query
	}
	return out
}

// alertRules returns each alert's expression by name.
func alertRules(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out[r.Alert] = r.Expr
			}
		}
	}
	return out
}

// ruleTests is the part of a promtool test file the test reads.
type ruleTests struct {
	Tests []struct {
		Name        string `yaml:"name"`
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// alertTests reads the promtool tests of the alert rules.
func alertTests(t *testing.T) ruleTests {
	t.Helper()
	raw, err := os.ReadFile(alertTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleTests
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", alertTestsFile, err)
	}
	return f
}
