// Command dashboardrules writes every PromQL query of a Grafana dashboard
// (each panel target's expr, each label_values variable's selector) as a
// recording rule, so that `promtool check rules` parses them: a query
// Grafana would only reject when drawn fails CI instead.
//
//	go run ./deploy/dashboardrules deploy/grafana/webhookd.json > dashboard.rules.yaml
//	promtool check rules dashboard.rules.yaml
//
// Grafana's interval variables become durations ($__rate_interval: 5m);
// other variables stay as written, inside label values, where PromQL
// takes them as text.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// intervals gives Grafana's built-in duration variables a value PromQL
// parses.
var intervals = strings.NewReplacer(
	"$__rate_interval", "5m",
	"$__interval", "1m",
	"$__range", "1h",
)

// labelValues reads label_values(selector, label), Grafana's variable
// query; only its selector is PromQL.
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

// panel is the part of a Grafana panel read here; a collapsed row holds
// its panels.
type panel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dashboardrules DASHBOARD.json > RULES.yaml")
		os.Exit(2)
	}
	rules, err := dashboardRules(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboardrules:", err)
		os.Exit(1)
	}
	// JSON is YAML, so promtool reads the rule file as it is.
	out, err := json.MarshalIndent(map[string]any{
		"groups": []any{map[string]any{"name": "dashboard", "rules": rules}},
	}, "", "  ")
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboardrules:", err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}

// dashboardRules reads the dashboard at path and returns one recording
// rule per query, named for its place (dashboard:q<N>) and labelled with
// the panel or variable it comes from.
func dashboardRules(path string) ([]map[string]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("error reading the dashboard: %w", err)
	}
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("error decoding %s: %w", path, err)
	}
	var rules []map[string]any
	add := func(from, expr string) {
		rules = append(rules, map[string]any{
			"record": fmt.Sprintf("dashboard:q%d", len(rules)+1),
			"expr":   intervals.Replace(expr),
			"labels": map[string]string{"from": from},
		})
	}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				add("panel "+p.Title, t.Expr)
			}
			walk(p.Panels)
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
				return nil, fmt.Errorf("variable %s: error reading its query: %w", v.Name, err)
			}
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			return nil, fmt.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, q.Query)
		}
		add("variable "+v.Name, m[1])
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("%s holds no query", path)
	}
	return rules, nil
}
