package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/jobs"
)

// Bounds of a rules test: how many stored events it evaluates by default
// and at most, and the size of an expression it takes.
const (
	defaultRulesTestLimit = 100
	maxRulesTestLimit     = 1000
	maxRuleBytes          = 4096
)

// RulesTestRequest is POST /admin/rules/test's body: the destination's
// configured rules, or When and Transform given instead, tried on the
// source's newest events (received since Since, at most Limit).
type RulesTestRequest struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
	When        string `json:"when,omitempty"`
	Transform   string `json:"transform,omitempty"`
	Since       string `json:"since,omitempty"`
	Limit       int    `json:"limit,omitempty"`
}

// RulesTestJSON is POST /admin/rules/test's answer.
type RulesTestJSON struct {
	// When and Transform are the rules tried.
	When      string           `json:"when,omitempty"`
	Transform string           `json:"transform,omitempty"`
	Results   []RuleResultJSON `json:"results"`
	Matched   int              `json:"matched"`
}

// RuleResultJSON is what the rules decide for one stored event: whether
// it matches, the body it would be sent (a transform's, else the raw
// body when it is JSON), or the error that would fail its run.
type RuleResultJSON struct {
	EventID string          `json:"event_id"`
	Match   bool            `json:"match"`
	Body    json.RawMessage `json:"body,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// rulesTest answers POST /admin/rules/test: nothing is sent or changed.
// A rule that does not compile is 422, an unknown source or destination
// 400.
func (a *Admin) rulesTest(c echo.Context) error {
	var in RulesTestRequest
	if err := bindJSONBody(c, &in); err != nil {
		return bindError("rules test", err)
	}
	res, err := a.tryRules(c.Request().Context(), in, time.Now())
	if err != nil {
		return httpError(err)
	}
	return c.JSON(http.StatusOK, res)
}

// errRuleCompile wraps a given rule that does not compile (422).
var errRuleCompile = errors.New("rule does not compile")

// tryRules evaluates the rules in of in on the stored events it names.
func (a *Admin) tryRules(ctx context.Context, in RulesTestRequest, now time.Time) (RulesTestJSON, error) {
	if err := checkText(textInput{"source", in.Source, maxNameBytes}, textInput{"destination", in.Destination, maxNameBytes},
		textInput{"since", in.Since, maxNameBytes}); err != nil {
		return RulesTestJSON{}, err
	}
	if len(in.When) > maxRuleBytes || len(in.Transform) > maxRuleBytes {
		return RulesTestJSON{}, fmt.Errorf("%w: a rule is longer than %d bytes", ErrBadFilter, maxRuleBytes)
	}
	if in.Source == "" || in.Destination == "" {
		return RulesTestJSON{}, fmt.Errorf("%w: source and destination are required", ErrBadFilter)
	}
	if err := a.checkName("source", in.Source, a.sources()); err != nil {
		return RulesTestJSON{}, err
	}
	dests, _ := a.routes().DestinationNames(in.Source)
	if err := a.checkName("destination", in.Destination, dests); err != nil {
		return RulesTestJSON{}, err
	}
	since, err := ParseTime(in.Since, now)
	if err != nil {
		return RulesTestJSON{}, fmt.Errorf("since: %w", err)
	}
	limit := in.Limit
	if limit <= 0 {
		limit = defaultRulesTestLimit
	}
	limit = min(limit, maxRulesTestLimit)
	rules := a.routes()[in.Source][in.Destination].Rules
	if in.When != "" || in.Transform != "" {
		when, transform := in.When, in.Transform
		if rules != nil && when == "" {
			when = rules.When
		}
		if rules != nil && transform == "" {
			transform = rules.Transform
		}
		if rules, err = jobs.CompileRules(when, transform); err != nil {
			return RulesTestJSON{}, fmt.Errorf("%w: %w", errRuleCompile, err)
		}
	}
	samples, err := a.events.RuleSamples(ctx, in.Source, since, limit)
	if err != nil {
		return RulesTestJSON{}, err
	}
	out := RulesTestJSON{Results: []RuleResultJSON{}}
	if rules != nil {
		out.When, out.Transform = rules.When, rules.Transform
	}
	for _, s := range samples {
		out.Results = append(out.Results, ruleResult(rules, in.Source, s))
		if out.Results[len(out.Results)-1].Match {
			out.Matched++
		}
	}
	return out, nil
}

// ruleResult is what rules decide for the stored event s.
func ruleResult(rules *jobs.Rules, source string, s dedupe.RuleSample) RuleResultJSON {
	r := RuleResultJSON{EventID: s.ExternalID}
	res, err := rules.Apply(jobs.RuleEvent{
		Source: source, ID: s.ExternalID, Type: s.EventType, ReceivedAt: s.ReceivedAt,
		Headers: s.Headers, Payload: s.Payload,
	})
	switch {
	case err != nil:
		r.Error = err.Error()
	case res.Body != nil:
		r.Match, r.Body = true, res.Body
	default:
		r.Match = res.Match
		if r.Match && json.Valid(s.Payload) {
			r.Body = s.Payload
		}
	}
	return r
}
