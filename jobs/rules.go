package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/field"
)

// RuleCostLimit bounds one evaluation of a rule (CEL's cost units, about
// one per operation and element visited): a rule over a large payload or
// a runaway comprehension ends with an error instead of a stuck worker.
const RuleCostLimit = 1_000_000

// Rules are a destination's `when` and `transform` (SPEC: "Rules"),
// compiled once when the configuration is read and applied at delivery
// time to the stored event: fixing a rule and replaying re-sends with the
// fixed rule.
type Rules struct {
	// When and Transform are the expressions as configured; empty when
	// not set.
	When, Transform string
	when, transform cel.Program
}

// RuleEvent is what rules see of an event: `event` (source, id, type,
// received_at, headers with lower-case names) and `body`.
type RuleEvent struct {
	Source, ID, Type string
	ReceivedAt       time.Time
	// Headers is the JSON object of the stored request headers.
	Headers []byte
	// Payload is the raw body; `body` is it parsed, null when it is not
	// JSON.
	Payload []byte
}

// RuleResult is what rules decide for one event.
type RuleResult struct {
	// Match is false when `when` rejected the event.
	Match bool
	// Body is the transformed body (JSON) when Transform is set and the
	// event matched; nil means the raw body is sent.
	Body []byte
}

// ErrRule wraps a rule that could not be evaluated on an event (a missing
// field, a type mismatch, the cost limit): the run fails, replayable.
var ErrRule = errors.New("rule error")

// ruleEnv is the one CEL environment of every rule: its variables, and
// numbers compared across int and double (JSON numbers are doubles).
var ruleEnv = func() *cel.Env {
	env, err := cel.NewEnv(
		cel.Variable("event", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("body", cel.DynType),
		cel.CrossTypeNumericComparisons(true),
		// event.headers[?"x-name"].orValue(""): a header that may be absent.
		cel.OptionalTypes(),
	)
	if err != nil {
		panic(fmt.Sprintf("rules: building the CEL environment: %v", err))
	}
	return env
}()

// CompileRules checks and compiles when and transform (either may be
// empty); nil when both are. An error is a *field.Error per key ("when",
// "transform"), naming for a syntax or type error the expression's
// column.
func CompileRules(when, transform string) (*Rules, error) {
	if strings.TrimSpace(when) == "" && strings.TrimSpace(transform) == "" {
		return nil, nil
	}
	r := &Rules{When: when, Transform: transform}
	var errs []error
	var err error
	if strings.TrimSpace(when) != "" {
		if r.when, err = compileRule(when, true); err != nil {
			errs = append(errs, &field.Error{Path: "when", Err: err})
		}
	}
	if strings.TrimSpace(transform) != "" {
		if r.transform, err = compileRule(transform, false); err != nil {
			errs = append(errs, &field.Error{Path: "transform", Err: err})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

// compileRule compiles one expression; a `when` must be a bool.
func compileRule(expr string, isWhen bool) (cel.Program, error) {
	ast, iss := ruleEnv.Compile(expr)
	if iss != nil && iss.Err() != nil {
		e := iss.Errors()[0]
		return nil, fmt.Errorf("column %d: %s", e.Location.Column()+1, e.Message)
	}
	if isWhen && ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
		return nil, fmt.Errorf("must be a bool, not %s", ast.OutputType())
	}
	prg, err := ruleEnv.Program(ast, cel.CostLimit(RuleCostLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, fmt.Errorf("%w", err)
	}
	return prg, nil
}

// Apply evaluates the rules on ev. An error wraps ErrRule.
func (r *Rules) Apply(ev RuleEvent) (RuleResult, error) {
	if r == nil {
		return RuleResult{Match: true}, nil
	}
	vars := map[string]any{"event": ruleEventVar(ev), "body": ruleBody(ev.Payload)}
	res := RuleResult{Match: true}
	if r.when != nil {
		out, _, err := r.when.Eval(vars)
		if err != nil {
			return res, fmt.Errorf("%w: when: %w", ErrRule, err)
		}
		match, ok := out.Value().(bool)
		if !ok {
			return res, fmt.Errorf("%w: when: gave %s, not a bool", ErrRule, out.Type().TypeName())
		}
		res.Match = match
	}
	if r.transform != nil && res.Match {
		out, _, err := r.transform.Eval(vars)
		if err != nil {
			return res, fmt.Errorf("%w: transform: %w", ErrRule, err)
		}
		if res.Body, err = ruleJSON(out); err != nil {
			return res, fmt.Errorf("%w: transform: %w", ErrRule, err)
		}
	}
	return res, nil
}

// ruleEventVar is `event`: headers by lower-case name, each its first
// value.
func ruleEventVar(ev RuleEvent) map[string]any {
	headers := map[string]any{}
	var stored map[string][]string
	if json.Unmarshal(ev.Headers, &stored) == nil {
		for k, vs := range stored {
			if len(vs) > 0 {
				headers[strings.ToLower(k)] = vs[0]
			}
		}
	}
	return map[string]any{
		"source": ev.Source, "id": ev.ID, "type": ev.Type,
		"received_at": ev.ReceivedAt, "headers": headers,
	}
}

// ruleBody is `body`: the payload parsed, or null when it is not JSON.
func ruleBody(payload []byte) any {
	var body any
	if json.Unmarshal(payload, &body) != nil {
		return types.NullValue
	}
	if body == nil {
		return types.NullValue
	}
	return body
}

// ruleJSON encodes a transform's result as JSON.
func ruleJSON(v interface {
	ConvertToNative(reflect.Type) (any, error)
}) ([]byte, error) {
	native, err := v.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return nil, fmt.Errorf("result is not JSON: %w", err)
	}
	raw, err := protojson.Marshal(native.(*structpb.Value))
	if err != nil {
		return nil, err
	}
	// protojson's spacing varies by design; what is signed and sent is
	// compact.
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// ruled applies dest's rules to the call req of the stored event ev: the
// call to make (its body transformed), or, when ok is false, the outcome
// to settle instead of a call: filtered when `when` rejected the event,
// failed for good when a rule could not be evaluated (a replay after the
// rule is fixed sends it).
func ruled(dest Destination, req callRequest, ev dedupe.StoredEvent) (_ callRequest, _ callResult, ok bool) {
	if dest.Rules == nil {
		return req, callResult{}, true
	}
	res, err := dest.Rules.Apply(RuleEvent{
		Source: req.source, ID: req.eventID, Type: ev.EventType, ReceivedAt: ev.ReceivedAt,
		Headers: ev.Headers, Payload: ev.Payload,
	})
	switch {
	case err != nil:
		// Counted and logged as a rule error, not as the destination's
		// refusal: the destination was not called.
		return req, callResult{outcome: dedupe.OutcomePermanent, err: "rule error: " + err.Error(), label: "rule_error", cause: CauseRule}, false
	case !res.Match:
		return req, callResult{outcome: dedupe.OutcomeFiltered}, false
	case res.Body != nil:
		req.body, req.contentType, req.transformed = res.Body, "application/json", true
	}
	return req, callResult{}, true
}
